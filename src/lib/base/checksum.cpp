#include "ptwm/base/checksum.hpp"

#include "base/cpu_features.hpp"

extern "C" {
unsigned long long ptwm_xxh3_generic(const void* p, unsigned long n);
#ifdef PTWM_XXH3_KERNELS
unsigned long long ptwm_xxh3_avx2(const void* p, unsigned long n);
unsigned long long ptwm_xxh3_avx512(const void* p, unsigned long n);
#endif
}

namespace ptwm {
namespace {

using Kernel = unsigned long long (*)(const void*, unsigned long);

Kernel pick() {
#ifdef PTWM_XXH3_KERNELS
    if (cpu::has_avx512()) return ptwm_xxh3_avx512;
    if (cpu::has_avx2()) return ptwm_xxh3_avx2;
#endif
    return ptwm_xxh3_generic;
}

}  // namespace

uint64_t xxh3(std::span<const uint8_t> bytes) {
    static const Kernel kernel = pick();
    return kernel(bytes.data(), bytes.size());
}

}  // namespace ptwm
