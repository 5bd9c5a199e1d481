#include "ptwm/planes/decomposition.hpp"

#include <array>
#include <cassert>
#include <cstring>

// Split and merge are compiled for x86-64-v4 (AVX-512) and AVX2 besides the
// baseline, picked at load time: the merge is a tenth of a BF16 chunk's
// decode, and AVX-512 does it in fewer steps (posenet BF16 in-memory decode
// 2778 -> 2875 MB/s). target_clones resolves through an ifunc, which runs
// before ThreadSanitizer's runtime is up and crashes it; TSan builds use the
// baseline code.
#if defined(__SANITIZE_THREAD__)
#define PTWM_SIMD_CLONES
#else
#define PTWM_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif

namespace ptwm {
namespace {

// Bit reorders: gather the exponent at the top of the element, sign just below.
inline uint16_t bf16_reorder(uint16_t v) {  // [S E8 M7] -> [E8 S M7]
    return static_cast<uint16_t>(((v << 1) & 0xFF00) | ((v >> 8) & 0x0080) | (v & 0x007F));
}
inline uint16_t bf16_restore(uint16_t r) {
    return static_cast<uint16_t>(((r & 0x0080) << 8) | ((r >> 1) & 0x7F80) | (r & 0x007F));
}
inline uint32_t f32_reorder(uint32_t v) {  // [S E8 M23] -> [E8 S M23]
    return ((v << 1) & 0xFF000000u) | ((v >> 8) & 0x00800000u) | (v & 0x007FFFFFu);
}
inline uint32_t f32_restore(uint32_t r) {
    return ((r & 0x00800000u) << 8) | ((r >> 1) & 0x7F800000u) | (r & 0x007FFFFFu);
}
inline uint8_t e4m3_reorder(uint8_t v) {  // [S E4 M3] -> [E4 S M3]
    return static_cast<uint8_t>(((v << 1) & 0xF0) | ((v >> 4) & 0x08) | (v & 0x07));
}
inline uint8_t e4m3_restore(uint8_t r) {
    return static_cast<uint8_t>(((r & 0x08) << 4) | ((r >> 1) & 0x78) | (r & 0x07));
}
inline uint8_t e5m2_reorder(uint8_t v) {  // [S E5 M2] -> [E5 S M2]
    return static_cast<uint8_t>(((v << 1) & 0xF8) | ((v >> 5) & 0x04) | (v & 0x03));
}
inline uint8_t e5m2_restore(uint8_t r) {
    return static_cast<uint8_t>(((r & 0x04) << 5) | ((r >> 1) & 0x7C) | (r & 0x03));
}

// The split loops take their planes as restrict pointers held in locals:
// with `planes[k][i] = ...` every store might change the pointer array (or
// the input), so the compiler reloaded the pointers per byte and kept the
// loops scalar (a BF16 chunk's split was two thirds of its rANS time).
template <unsigned N>
void split_bytes(const uint8_t* __restrict in, size_t count, uint8_t* const* planes) {
    std::array<uint8_t*, N> p;
    for (unsigned k = 0; k < N; ++k) p[k] = planes[k];
    for (size_t i = 0; i < count; ++i)
        for (unsigned k = 0; k < N; ++k) p[k][i] = in[i * N + k];
}
void split_bf16(const uint8_t* __restrict in, size_t count, uint8_t* __restrict lo, uint8_t* __restrict hi) {
    for (size_t i = 0; i < count; ++i) {
        uint16_t v;
        std::memcpy(&v, in + 2 * i, 2);
        const uint16_t r = bf16_reorder(v);
        lo[i] = static_cast<uint8_t>(r);
        hi[i] = static_cast<uint8_t>(r >> 8);
    }
}
void split_f32(const uint8_t* __restrict in, size_t count, uint8_t* __restrict p0, uint8_t* __restrict p1,
               uint8_t* __restrict p2, uint8_t* __restrict p3) {
    for (size_t i = 0; i < count; ++i) {
        uint32_t v;
        std::memcpy(&v, in + 4 * i, 4);
        const uint32_t r = f32_reorder(v);
        p0[i] = static_cast<uint8_t>(r);
        p1[i] = static_cast<uint8_t>(r >> 8);
        p2[i] = static_cast<uint8_t>(r >> 16);
        p3[i] = static_cast<uint8_t>(r >> 24);
    }
}
template <unsigned N>
void merge_bytes(const uint8_t* const* planes, size_t count, uint8_t* out) {
    for (size_t i = 0; i < count; ++i)
        for (unsigned k = 0; k < N; ++k) out[i * N + k] = planes[k][i];
}

// Nibble planes: plane 0 holds the high nibbles, plane 1 the low ones; in a
// plane, element 2j sits in the low nibble of byte j and 2j+1 in the high.
template <uint8_t (*Reorder)(uint8_t)>
void split_nibbles(const uint8_t* __restrict in, size_t n, uint8_t* __restrict hi, uint8_t* __restrict lo) {
    size_t j = 0;
    for (; 2 * j + 1 < n; ++j) {
        const uint8_t a = Reorder(in[2 * j]), b = Reorder(in[2 * j + 1]);
        hi[j] = static_cast<uint8_t>((a >> 4) | (b & 0xF0));
        lo[j] = static_cast<uint8_t>((a & 0x0F) | (b << 4));
    }
    if (2 * j < n) {
        const uint8_t a = Reorder(in[2 * j]);
        hi[j] = static_cast<uint8_t>(a >> 4);
        lo[j] = static_cast<uint8_t>(a & 0x0F);
    }
}
template <uint8_t (*Restore)(uint8_t)>
void merge_nibbles(const uint8_t* hi, const uint8_t* lo, size_t n, uint8_t* out) {
    for (size_t i = 0; i < n; ++i) {
        const unsigned shift = (i & 1) * 4;
        const uint8_t h = (hi[i / 2] >> shift) & 0x0F, l = (lo[i / 2] >> shift) & 0x0F;
        out[i] = Restore(static_cast<uint8_t>((h << 4) | l));
    }
}
inline uint8_t identity(uint8_t v) { return v; }

// FP4 (E2M1) nibbles as sign and magnitude: element 2j is the low nibble of
// byte j. Signs pack 8 to a byte, magnitudes (3 bits) 2 to a byte.
void split_sign_magnitude(const uint8_t* in, size_t n, uint8_t* signs, uint8_t* mags) {
    if (n == 0) return;  // signs may be null then (an empty plane's data)
    std::memset(signs, 0, (2 * n + 7) / 8);
    for (size_t j = 0; j < n; ++j) {
        const uint8_t lo = in[j] & 0x0F, hi = in[j] >> 4;
        signs[(2 * j) / 8] |= static_cast<uint8_t>(((lo >> 3) | ((hi >> 3) << 1)) << ((2 * j) % 8));
        mags[j] = static_cast<uint8_t>((lo & 7) | ((hi & 7) << 3));
    }
}
void merge_sign_magnitude(const uint8_t* signs, const uint8_t* mags, size_t n, uint8_t* out) {
    for (size_t j = 0; j < n; ++j) {
        const unsigned s = (signs[(2 * j) / 8] >> ((2 * j) % 8)) & 3;
        out[j] = static_cast<uint8_t>((mags[j] & 7) | ((s & 1) << 3) | (((mags[j] >> 3) & 7) << 4) | ((s >> 1) << 7));
    }
}

}  // namespace

bool is_known(Decomposition d) { return static_cast<uint8_t>(d) <= static_cast<uint8_t>(Decomposition::fp4_nv_tabled); }

bool is_grouped(Decomposition d) {
    return d == Decomposition::fp4_mx_grouped || d == Decomposition::fp4_nv_grouped || keeps_blocks(d);
}

bool keeps_blocks(Decomposition d) {
    return d == Decomposition::fp4_mx_modelled || d == Decomposition::fp4_mx_tabled || d == Decomposition::fp4_nv_tabled;
}

std::string_view name(Decomposition d) {
    switch (d) {
        case Decomposition::stream: return "stream";
        case Decomposition::split2: return "split2";
        case Decomposition::split4: return "split4";
        case Decomposition::split8: return "split8";
        case Decomposition::bf16_exponent: return "bf16-exponent";
        case Decomposition::f32_exponent: return "f32-exponent";
        case Decomposition::f8e4m3_exponent: return "f8e4m3-exponent";
        case Decomposition::f8e5m2_exponent: return "f8e5m2-exponent";
        case Decomposition::nibble_split: return "nibble-split";
        case Decomposition::fp4_sign_magnitude: return "fp4-sign-magnitude";
        case Decomposition::fp4_mx_grouped: return "fp4-mx-scale-grouped";
        case Decomposition::fp4_nv_grouped: return "fp4-nv-scale-grouped";
        case Decomposition::fp4_mx_modelled: return "fp4-mx-modelled";
        case Decomposition::fp4_mx_tabled: return "fp4-mx-tabled";
        case Decomposition::fp4_nv_tabled: return "fp4-nv-tabled";
    }
    return "unknown";
}

unsigned element_bytes(Decomposition d) {
    switch (d) {
        case Decomposition::split2:
        case Decomposition::bf16_exponent: return 2;
        case Decomposition::split4:
        case Decomposition::f32_exponent: return 4;
        case Decomposition::split8:
        case Decomposition::fp4_nv_grouped:
        case Decomposition::fp4_nv_tabled: return 8;
        case Decomposition::fp4_mx_grouped:
        case Decomposition::fp4_mx_modelled:
        case Decomposition::fp4_mx_tabled: return 16;
        default: return 1;
    }
}

unsigned plane_count(Decomposition d) {
    switch (d) {
        case Decomposition::stream:
        case Decomposition::fp4_mx_modelled:
        case Decomposition::fp4_mx_tabled:
        case Decomposition::fp4_nv_tabled: return 1;
        case Decomposition::f8e4m3_exponent:
        case Decomposition::f8e5m2_exponent:
        case Decomposition::nibble_split:
        case Decomposition::fp4_sign_magnitude: return 2;
        case Decomposition::fp4_mx_grouped:
        case Decomposition::fp4_nv_grouped: return kMaxPlanes;
        default: return element_bytes(d);
    }
}

size_t plane_length(Decomposition d, size_t n, unsigned p) {
    switch (d) {
        case Decomposition::fp4_sign_magnitude: return p == 0 ? (2 * n + 7) / 8 : n;
        case Decomposition::f8e4m3_exponent:
        case Decomposition::f8e5m2_exponent:
        case Decomposition::nibble_split: return (n + 1) / 2;
        default: return n / element_bytes(d);
    }
}

// Built for AVX2 and for the baseline, chosen at load time: the byte
// shuffles vectorise twice as wide where the CPU has it.
PTWM_SIMD_CLONES
void split(Decomposition d, std::span<const uint8_t> in, std::span<uint8_t* const> planes) {
    assert(planes.size() == plane_count(d) && in.size() % element_bytes(d) == 0);
    const uint8_t* src = in.data();
    const size_t n = in.size();
    switch (d) {
        case Decomposition::stream:
            if (n) std::memcpy(planes[0], src, n);
            return;
        case Decomposition::split2: split_bytes<2>(src, n / 2, planes.data()); return;
        case Decomposition::split4: split_bytes<4>(src, n / 4, planes.data()); return;
        case Decomposition::split8: split_bytes<8>(src, n / 8, planes.data()); return;
        case Decomposition::bf16_exponent: split_bf16(src, n / 2, planes[0], planes[1]); return;
        case Decomposition::f32_exponent: split_f32(src, n / 4, planes[0], planes[1], planes[2], planes[3]); return;
        case Decomposition::f8e4m3_exponent: split_nibbles<e4m3_reorder>(src, n, planes[0], planes[1]); return;
        case Decomposition::f8e5m2_exponent: split_nibbles<e5m2_reorder>(src, n, planes[0], planes[1]); return;
        case Decomposition::nibble_split: split_nibbles<identity>(src, n, planes[0], planes[1]); return;
        case Decomposition::fp4_sign_magnitude: split_sign_magnitude(src, n, planes[0], planes[1]); return;
        case Decomposition::fp4_mx_grouped:
        case Decomposition::fp4_nv_grouped:
        case Decomposition::fp4_mx_modelled:
        case Decomposition::fp4_mx_tabled:
        case Decomposition::fp4_nv_tabled: assert(!"grouped decompositions split in fp4_groups"); return;
    }
}

PTWM_SIMD_CLONES
void merge(Decomposition d, std::span<const uint8_t* const> planes, std::span<uint8_t> out) {
    assert(planes.size() == plane_count(d) && out.size() % element_bytes(d) == 0);
    uint8_t* dst = out.data();
    const size_t n = out.size();
    switch (d) {
        case Decomposition::stream:
            if (n) std::memcpy(dst, planes[0], n);
            return;
        case Decomposition::split2: merge_bytes<2>(planes.data(), n / 2, dst); return;
        case Decomposition::split4: merge_bytes<4>(planes.data(), n / 4, dst); return;
        case Decomposition::split8: merge_bytes<8>(planes.data(), n / 8, dst); return;
        case Decomposition::bf16_exponent: {
            const uint8_t* lo = planes[0];
            const uint8_t* hi = planes[1];
            for (size_t i = 0; i < n / 2; ++i) {
                const uint16_t v = bf16_restore(static_cast<uint16_t>(lo[i] | (hi[i] << 8)));
                std::memcpy(dst + 2 * i, &v, 2);
            }
            return;
        }
        case Decomposition::f32_exponent:
            for (size_t i = 0; i < n / 4; ++i) {
                const uint32_t r = planes[0][i] | (planes[1][i] << 8) | (planes[2][i] << 16) |
                                   (static_cast<uint32_t>(planes[3][i]) << 24);
                const uint32_t v = f32_restore(r);
                std::memcpy(dst + 4 * i, &v, 4);
            }
            return;
        case Decomposition::f8e4m3_exponent: merge_nibbles<e4m3_restore>(planes[0], planes[1], n, dst); return;
        case Decomposition::f8e5m2_exponent: merge_nibbles<e5m2_restore>(planes[0], planes[1], n, dst); return;
        case Decomposition::nibble_split: merge_nibbles<identity>(planes[0], planes[1], n, dst); return;
        case Decomposition::fp4_sign_magnitude: merge_sign_magnitude(planes[0], planes[1], n, dst); return;
        case Decomposition::fp4_mx_grouped:
        case Decomposition::fp4_nv_grouped:
        case Decomposition::fp4_mx_modelled:
        case Decomposition::fp4_mx_tabled:
        case Decomposition::fp4_nv_tabled: assert(!"grouped decompositions merge in fp4_groups"); return;
    }
}

}  // namespace ptwm
