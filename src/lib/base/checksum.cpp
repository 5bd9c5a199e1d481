#include "ptwm/base/checksum.hpp"

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
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) return ptwm_xxh3_avx512;
    if (__builtin_cpu_supports("avx2")) return ptwm_xxh3_avx2;
#endif
    return ptwm_xxh3_generic;
}

}  // namespace

uint64_t xxh3(std::span<const uint8_t> bytes) {
    static const Kernel kernel = pick();
    return kernel(bytes.data(), bytes.size());
}

}  // namespace ptwm
