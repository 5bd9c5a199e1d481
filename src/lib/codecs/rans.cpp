#include "codecs/rans.hpp"

#include <htscodecs/rANS_static4x16.h>

#include <array>
#include <cstring>

#include "base/cpu_features.hpp"
#include "base/scratch.hpp"
#include "codecs/static_rans.hpp"
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
    // htscodecs' AVX-512 order-1 encoder before 1.5 (fixed upstream in
    // "Fix O1 AVX512 encoder", 2023) reads the byte before its input and
    // discards it: it is given a copy with room before it.
    bool o1_reads_before_input = false;
};

const Kernels& kernels() {
    static const Kernels k = [] {
        __builtin_cpu_init();
        // AVX-512 decodes 15% faster than AVX2 on the EPYC this project
        // runs on (1.87 against 1.62 G symbols/s on a BF16 exponent plane).
        // (Not under ThreadSanitizer: the AVX-512 order-1 encoder crashes
        // inside htscodecs there, while the AVX2 one, which htscodecs itself
        // picks on AMD CPUs, runs clean.)
        // The order-0 encoders are the other way round: AVX2 encodes a
        // quarter faster than AVX-512 (930 against 735 MB/s on a 16 KiB
        // plane of FP4 nibbles, 960 against 750 at 64 KiB). Order 1 is not:
        // AVX-512 466 against 273 MB/s on a 256 KiB chunk of MXFP4 block
        // scales, 558 against 464 on NVFP4's. Each writes the same bytes as
        // the other (65 planes of scales, weights and random bytes compared).
        if (kAllowAvx512 && cpu::has_avx512() && cpu::has_avx2())
            return Kernels{{rans_compress_O0_32x16_avx2, rans_compress_O1_32x16_avx512},
                           {rans_uncompress_O0_32x16_avx512, rans_uncompress_O1_32x16_avx512},
                           true};
        if (cpu::has_avx2())
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
thread_local Scratch t_in;   // a copy of the input for kernels that read before it

std::vector<uint8_t> encode_public(std::span<const uint8_t> plane, int flags) {
    const auto out = t_out.get(rans_compress_bound_4x16(static_cast<unsigned>(plane.size()), flags));
    unsigned out_size = static_cast<unsigned>(out.size());
    // htscodecs takes non-const pointers but does not write to its input.
    if (!rans_compress_to_4x16(const_cast<uint8_t*>(plane.data()), static_cast<unsigned>(plane.size()), out.data(),
                               &out_size, flags))
        throw Error("rANS encoder failed on a plane of " + std::to_string(plane.size()) + " bytes");
    return {out.begin(), out.begin() + out_size};
}

// htscodecs' order-0 four-state stream (flags RANS_ORDER_NOSZ alone), decoded
// here: htscodecs builds three tables of 4096 slots a call, one 16-bit
// store at a time, some 4 us whatever the plane's size -- on the corpus's
// FP8 files that was 4-7% of the decode time, spent on bias planes of a
// few hundred bytes. The stream, as rans_uncompress_O0_4x16 (htscodecs 1.3)
// reads it:
//   - the alphabet: a symbol, then either the next symbol or, where the
//     next byte is the symbol's successor, that byte and a run length of
//     further successors; a 0 after the first symbol ends it;
//   - each present symbol's frequency (big-endian 7-bit groups), in
//     symbol order, scaled by a power of two to sum to 4096;
//   - then a static rANS stream as static_rans.hpp's (four little-endian
//     32-bit states in [2^15, 2^31), byte i on state i % 4, 16-bit words),
//     which its DecodeState and get() read, with a byte-a-slot table
//     filled by memset: a twentieth of htscodecs' set-up.
// On valid streams it gives htscodecs' bytes (tests decode with both); on
// damaged ones it returns false where htscodecs returns NULL or stops
// renormalising at the payload's end, and never reads outside the payload.
constexpr unsigned kO0Shift = 12;
constexpr uint32_t kO0Total = 1u << kO0Shift;

// htscodecs' unsigned varint (var_get_u32): big-endian 7-bit groups, at
// most 5, the high bit set on all but the last. False past `end`.
bool read_varint(const uint8_t*& cp, const uint8_t* end, uint32_t& value) {
    value = 0;
    for (int k = 0;; ++k) {
        if (cp >= end || k == 5) return false;
        const uint8_t c = *cp++;
        value = value << 7 | (c & 0x7F);
        if (!(c & 0x80)) return true;
    }
}

bool decode_order0(std::span<const uint8_t> in, std::span<uint8_t> out) {
    if (in.size() < 16) return false;
    const uint8_t* cp = in.data();
    const uint8_t* const table_end = in.data() + in.size() - 8;  // htscodecs' bound for the table
    std::array<uint32_t, 256> freq{};
    // The alphabet.
    {
        if (cp >= table_end) return false;
        unsigned j = *cp++, run = 0;
        do {
            freq[j] = 1;
            if (cp >= table_end) return false;
            if (!run && j + 1 == *cp) {
                if (cp + 1 >= table_end) return false;
                j = cp[0];
                run = cp[1];
                cp += 2;
            } else if (run) {
                --run;
                if (++j > 255) return false;
            } else {
                j = *cp++;
            }
        } while (j);
    }
    uint32_t sum = 0;
    for (unsigned j = 0; j < 256; ++j) {
        if (!freq[j]) continue;
        uint32_t f = 0;
        if (!read_varint(cp, table_end, f)) return false;
        freq[j] = f;
        sum += f;
    }
    if (sum == 0 || sum > kO0Total) return false;
    unsigned shift = 0;
    while ((sum << shift) < kO0Total) ++shift;
    srans::DecodeTable t;
    t.symbol.resize(kO0Total);
    t.freq.assign(256, 0);
    t.cum.assign(256, 0);
    uint32_t x = 0;
    for (unsigned j = 0; j < 256; ++j) {
        if (!freq[j]) continue;
        const uint32_t f = freq[j] << shift;
        if (f > kO0Total - x) return false;
        t.freq[j] = f;
        t.cum[j] = x;
        std::memset(t.symbol.data() + x, static_cast<int>(j), f);
        x += f;
    }
    if (x != kO0Total) return false;
    try {
        srans::DecodeState<> d(in.subspan(static_cast<size_t>(cp - in.data())));
        // Local copies: stores to `out` could alias d's members.
        auto r = d.x;
        const uint8_t* p = d.p;
        const size_t n = out.size();
        size_t i = 0;
        for (; i + 4 <= n; i += 4)
            for (unsigned k = 0; k < 4; ++k) out[i + k] = static_cast<uint8_t>(srans::get(r[k], p, d.end, t, kO0Shift));
        for (; i < n; ++i) out[i] = static_cast<uint8_t>(srans::get(r[i & 3], p, d.end, t, kO0Shift));
    } catch (const CorruptData&) {
        return false;
    }
    return true;
}

}  // namespace

unsigned states(size_t n) { return n < kX32Min ? 4 : 32; }

std::vector<uint8_t> encode(std::span<const uint8_t> plane, unsigned order) {
    if (plane.size() < kX32Min) return encode_public(plane, static_cast<int>(order) | RANS_ORDER_NOSZ);
#ifdef PTWM_HTSCODECS_KERNELS
    const auto out = t_out.get(rans_compress_bound_4x16(static_cast<unsigned>(plane.size()), RANS_ORDER_X32 | 1));
    unsigned out_size = static_cast<unsigned>(out.size() - 1);
    out[0] = static_cast<uint8_t>(kX32Header | order);
    const Kernels& k = kernels();
    // (htscodecs takes non-const pointers but does not write to its input.)
    uint8_t* in = const_cast<uint8_t*>(plane.data());
    if (order == 1 && k.o1_reads_before_input) {
        constexpr size_t kRoom = 64;
        in = t_in.get(kRoom + plane.size()).data() + kRoom;
        std::memcpy(in, plane.data(), plane.size());
    }
    if (k.encode[order](in, static_cast<unsigned>(plane.size()), out.data() + 1, &out_size) &&
        out_size < plane.size())
        return {out.begin(), out.begin() + 1 + out_size};
#endif
    return encode_public(plane, static_cast<int>(order) | RANS_ORDER_X32 | RANS_ORDER_NOSZ);
}

// An order-1 stream (from its first byte, after the payload's flags and
// size) whose frequency table, when compressed, declares an uncompressed
// size no table has: htscodecs' order-1 decoders allocate that size before
// anything checks it, so a damaged 5 KB payload asked for 1.94 GB (a fuzz
// input, some seconds under ASan; a failed allocation under strict
// overcommit). A table is 256 contexts of at most 256 symbols, a few bytes
// each.
constexpr uint32_t kMaxOrder1TableBytes = 1u << 20;
bool order1_table_size_plausible(std::span<const uint8_t> stream) {
    if (stream.empty()) return false;
    if (!(stream[0] & 1)) return true;  // the table is stored as it is
    const uint8_t* cp = stream.data() + 1;
    uint32_t table_bytes = 0;
    return read_varint(cp, stream.data() + stream.size(), table_bytes) && table_bytes <= kMaxOrder1TableBytes;
}

bool decode(std::span<const uint8_t> payload, std::span<uint8_t> out) {
    if (payload.empty()) return false;
    const bool order1 = (payload[0] & 1) && !(payload[0] & RANS_ORDER_CAT);
#ifdef PTWM_HTSCODECS_KERNELS
    const uint8_t order = payload[0] & 1;
    if ((payload[0] & ~1u) == kX32Header) {
        if (order1 && !order1_table_size_plausible(payload.subspan(1))) return false;
        return kernels().decode[order](const_cast<uint8_t*>(payload.data() + 1), static_cast<unsigned>(payload.size() - 1),
                                       out.data(), static_cast<unsigned>(out.size())) != nullptr;
    }
#endif
    if (payload[0] == RANS_ORDER_NOSZ) return decode_order0(payload.subspan(1), out);
    // Only flags ptwm writes: htscodecs sizes and allocates its RLE, pack
    // and stripe buffers from the payload before checking them, so a few
    // hundred damaged bytes could make it allocate gigabytes.
    constexpr unsigned kFlagsWritten = 1u | RANS_ORDER_X32 | RANS_ORDER_NOSZ | RANS_ORDER_CAT;
    if ((payload[0] & ~kFlagsWritten) != 0) return false;
    if (order1) {
        const uint8_t* cp = payload.data() + 1;
        uint32_t size = 0;  // the output size, unless NOSZ
        if (!(payload[0] & RANS_ORDER_NOSZ) && !read_varint(cp, payload.data() + payload.size(), size)) return false;
        if (!order1_table_size_plausible({cp, payload.data() + payload.size()})) return false;
    }
    unsigned out_size = static_cast<unsigned>(out.size());
    return rans_uncompress_to_4x16(const_cast<uint8_t*>(payload.data()), static_cast<unsigned>(payload.size()), out.data(),
                                   &out_size) != nullptr &&
           out_size == out.size();
}

}  // namespace ptwm::rans
