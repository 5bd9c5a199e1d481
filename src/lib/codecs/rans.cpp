#include "codecs/rans.hpp"

#include <htscodecs/rANS_static4x16.h>

#include "base/scratch.hpp"
#include "ptwm/base/error.hpp"

#ifdef PTWM_HTSCODECS_KERNELS
// Exported by libhtscodecs but declared only in its private header
// rANS_static32x16pr.h; meson checks they link before defining the macro.
extern "C" {
unsigned char* rans_compress_O0_32x16(unsigned char* in, unsigned int in_size, unsigned char* out, unsigned int* out_size);
unsigned char* rans_compress_O1_32x16(unsigned char* in, unsigned int in_size, unsigned char* out, unsigned int* out_size);
unsigned char* rans_uncompress_O0_32x16(unsigned char* in, unsigned int in_size, unsigned char* out, unsigned int out_size);
unsigned char* rans_uncompress_O1_32x16(unsigned char* in, unsigned int in_size, unsigned char* out, unsigned int out_size);
unsigned char* rans_compress_O0_32x16_avx2(unsigned char* in, unsigned int in_size, unsigned char* out, unsigned int* out_size);
unsigned char* rans_compress_O1_32x16_avx2(unsigned char* in, unsigned int in_size, unsigned char* out, unsigned int* out_size);
unsigned char* rans_uncompress_O0_32x16_avx2(unsigned char* in, unsigned int in_size, unsigned char* out, unsigned int out_size);
unsigned char* rans_uncompress_O1_32x16_avx2(unsigned char* in, unsigned int in_size, unsigned char* out, unsigned int out_size);
unsigned char* rans_compress_O0_32x16_avx512(unsigned char* in, unsigned int in_size, unsigned char* out, unsigned int* out_size);
unsigned char* rans_compress_O1_32x16_avx512(unsigned char* in, unsigned int in_size, unsigned char* out, unsigned int* out_size);
unsigned char* rans_uncompress_O0_32x16_avx512(unsigned char* in, unsigned int in_size, unsigned char* out, unsigned int out_size);
unsigned char* rans_uncompress_O1_32x16_avx512(unsigned char* in, unsigned int in_size, unsigned char* out, unsigned int out_size);
}
#endif

namespace ptwm::rans {
namespace {

// Planes this large use the 32-state stream, which the SIMD kernels decode
// several times faster than htscodecs' scalar 4-state one. Its 28 more
// states cost 112 bytes, which the plane contest's rule for near ties
// (the faster decoder wins within 1% of the plane) allows from 11200 bytes:
// against 16 KiB, posenet BF16 decodes 3-7% faster for 0.01% in size, and
// MXFP4's thousand small group planes keep their 4-state streams (from
// 4 KiB they grew the file by 0.37%).
constexpr size_t kX32Min = 11200;
// The first payload byte of a 32-way stream without size field, as
// htscodecs writes it: order | RANS_ORDER_X32 | RANS_ORDER_NOSZ.
constexpr uint8_t kX32Header = RANS_ORDER_X32 | RANS_ORDER_NOSZ;

#ifdef PTWM_HTSCODECS_KERNELS
#if defined(__SANITIZE_THREAD__)
constexpr bool kAllowAvx512 = false;
#else
constexpr bool kAllowAvx512 = true;
#endif

using EncodeKernel = unsigned char* (*)(unsigned char*, unsigned int, unsigned char*, unsigned int*);
using DecodeKernel = unsigned char* (*)(unsigned char*, unsigned int, unsigned char*, unsigned int);

struct Kernels {
    EncodeKernel encode[2];
    DecodeKernel decode[2];
};

const Kernels& kernels() {
    static const Kernels k = [] {
        __builtin_cpu_init();
        // AVX-512 decodes 15% faster than AVX2 on the EPYC this project
        // runs on (1.87 against 1.62 G symbols/s on a BF16 exponent plane).
        // (Not under ThreadSanitizer: the AVX-512 order-1 encoder crashes
        // inside htscodecs there, while the AVX2 one, which htscodecs itself
        // picks on AMD CPUs, runs clean.)
        // The encoders are the other way round: AVX2 encodes a quarter
        // faster than AVX-512 (930 against 735 MB/s on a 16 KiB plane of
        // FP4 nibbles, 960 against 750 at 64 KiB), and writes the same bytes.
        if (kAllowAvx512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx2"))
            return Kernels{{rans_compress_O0_32x16_avx2, rans_compress_O1_32x16_avx2},
                           {rans_uncompress_O0_32x16_avx512, rans_uncompress_O1_32x16_avx512}};
        if (__builtin_cpu_supports("avx2"))
            return Kernels{{rans_compress_O0_32x16_avx2, rans_compress_O1_32x16_avx2},
                           {rans_uncompress_O0_32x16_avx2, rans_uncompress_O1_32x16_avx2}};
        return Kernels{{rans_compress_O0_32x16, rans_compress_O1_32x16},
                       {rans_uncompress_O0_32x16, rans_uncompress_O1_32x16}};
    }();
    return k;
}
#endif

// Through htscodecs' public entry points (small planes, and builds without
// the kernels).
thread_local Scratch t_out;  // encoder output, copied out at its final size

std::vector<uint8_t> encode_public(std::span<const uint8_t> plane, int flags) {
    const auto out = t_out.get(rans_compress_bound_4x16(static_cast<unsigned>(plane.size()), flags));
    unsigned out_size = static_cast<unsigned>(out.size());
    // htscodecs takes non-const pointers but does not write to its input.
    if (!rans_compress_to_4x16(const_cast<uint8_t*>(plane.data()), static_cast<unsigned>(plane.size()), out.data(),
                               &out_size, flags))
        throw Error("rANS encoder failed on a plane of " + std::to_string(plane.size()) + " bytes");
    return {out.begin(), out.begin() + out_size};
}

}  // namespace

unsigned states(size_t n) { return n < kX32Min ? 4 : 32; }

std::vector<uint8_t> encode(std::span<const uint8_t> plane, unsigned order) {
    if (plane.size() < kX32Min) return encode_public(plane, static_cast<int>(order) | RANS_ORDER_NOSZ);
#ifdef PTWM_HTSCODECS_KERNELS
    const auto out = t_out.get(rans_compress_bound_4x16(static_cast<unsigned>(plane.size()), RANS_ORDER_X32 | 1));
    unsigned out_size = static_cast<unsigned>(out.size() - 1);
    out[0] = static_cast<uint8_t>(kX32Header | order);
    if (kernels().encode[order](const_cast<uint8_t*>(plane.data()), static_cast<unsigned>(plane.size()), out.data() + 1,
                                &out_size) &&
        out_size < plane.size())
        return {out.begin(), out.begin() + 1 + out_size};
#endif
    return encode_public(plane, static_cast<int>(order) | RANS_ORDER_X32 | RANS_ORDER_NOSZ);
}

bool decode(std::span<const uint8_t> payload, std::span<uint8_t> out) {
    if (payload.empty()) return false;
#ifdef PTWM_HTSCODECS_KERNELS
    const uint8_t order = payload[0] & 1;
    if ((payload[0] & ~1u) == kX32Header)
        return kernels().decode[order](const_cast<uint8_t*>(payload.data() + 1), static_cast<unsigned>(payload.size() - 1),
                                       out.data(), static_cast<unsigned>(out.size())) != nullptr;
#endif
    // Only flags ptwm writes: htscodecs sizes and allocates its RLE, pack
    // and stripe buffers from the payload before checking them, so a few
    // hundred damaged bytes could make it allocate gigabytes.
    constexpr unsigned kFlagsWritten = 1u | RANS_ORDER_X32 | RANS_ORDER_NOSZ | RANS_ORDER_CAT;
    if ((payload[0] & ~kFlagsWritten) != 0) return false;
    unsigned out_size = static_cast<unsigned>(out.size());
    return rans_uncompress_to_4x16(const_cast<uint8_t*>(payload.data()), static_cast<unsigned>(payload.size()), out.data(),
                                   &out_size) != nullptr &&
           out_size == out.size();
}

}  // namespace ptwm::rans
