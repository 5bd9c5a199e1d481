#pragma once

// An AVX2 step of 8 static rANS states: srans::put (put_word) on 8 lanes at
// once, with the same arithmetic (EncodeSymbol's reciprocal), so the same
// states and words as put() lane by lane. The words of the lanes that
// renormalise are stored in lane order just below the cursor.
#if defined(__x86_64__)
#include <immintrin.h>

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>

#include "codecs/static_rans.hpp"

namespace ptwm::srans::avx2 {

// For each 8-bit lane mask, a byte shuffle that moves the masked lanes'
// words (8 words in a 128-bit vector, lane k in bytes 2k, 2k + 1) to the
// top of the vector, in lane order: the n kept words end at byte 16.
struct CompressTable {
    alignas(16) std::array<std::array<uint8_t, 16>, 256> shuf{};
    constexpr CompressTable() {
        for (unsigned m = 0; m < 256; ++m) {
            const unsigned n = static_cast<unsigned>(std::popcount(m));
            unsigned at = 16 - 2 * n;
            for (unsigned b = 0; b < 16 - 2 * n; ++b) shuf[m][b] = 0x80;
            for (unsigned k = 0; k < 8; ++k)
                if (m >> k & 1) {
                    shuf[m][at++] = static_cast<uint8_t>(2 * k);
                    shuf[m][at++] = static_cast<uint8_t>(2 * k + 1);
                }
        }
    }
};
inline constexpr CompressTable kCompress{};

// The 4 fields of 8 EncodeSymbols as 4 vectors of 8 lanes (a transpose of
// 8 aligned 16-byte loads).
struct Fields {
    __m256i x_max, rcp, bias, cs;  // cs: cmpl_freq | rcp_shift << 16
};
__attribute__((target("avx2"), always_inline)) inline Fields load_fields(const EncodeSymbol* const* e) {
    const auto ld = [](const EncodeSymbol* s) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(s)); };
    const __m256i r0 = _mm256_inserti128_si256(_mm256_castsi128_si256(ld(e[0])), ld(e[4]), 1);
    const __m256i r1 = _mm256_inserti128_si256(_mm256_castsi128_si256(ld(e[1])), ld(e[5]), 1);
    const __m256i r2 = _mm256_inserti128_si256(_mm256_castsi128_si256(ld(e[2])), ld(e[6]), 1);
    const __m256i r3 = _mm256_inserti128_si256(_mm256_castsi128_si256(ld(e[3])), ld(e[7]), 1);
    const __m256i t0 = _mm256_unpacklo_epi32(r0, r1), t1 = _mm256_unpacklo_epi32(r2, r3);
    const __m256i t2 = _mm256_unpackhi_epi32(r0, r1), t3 = _mm256_unpackhi_epi32(r2, r3);
    return {_mm256_unpacklo_epi64(t0, t1), _mm256_unpackhi_epi64(t0, t1), _mm256_unpacklo_epi64(t2, t3),
            _mm256_unpackhi_epi64(t2, t3)};
}

// The low words of the 8 states x whose bits are set in `mask` (bit k:
// lane k renormalises), stored in lane order just below p, which moves
// down past them (2 bytes a word). Writes 16 bytes below p whatever it
// keeps: the buffer needs that much slack below its last word
// (EncodeBuffer has 4 * lanes + 2 bytes).
__attribute__((target("avx2"), always_inline)) inline void store_words(__m256i x, unsigned mask, uint8_t*& p) {
    // The low words of the 8 lanes as one 128-bit vector, then the kept ones
    // to its top.
    const __m256i lo = _mm256_shuffle_epi8(
        x, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1,
                            -1, -1, -1, -1, -1));
    const __m128i words = _mm256_castsi256_si128(_mm256_permute4x64_epi64(lo, 0x08));
    const __m128i kept =
        _mm_shuffle_epi8(words, _mm_load_si128(reinterpret_cast<const __m128i*>(kCompress.shuf[mask].data())));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p - 16), kept);
    p -= 2 * static_cast<unsigned>(std::popcount(mask));
}

// put_word's step from y (x after its renormalisation) on 8 lanes: x =
// y + bias + q * cmpl_freq, q = the high half of y * rcp_freq shifted right
// by rcp_shift (per lane).
__attribute__((target("avx2"), always_inline)) inline __m256i step(__m256i y, __m256i rcp, __m256i rcp_shift, __m256i bias,
                                                                  __m256i cmpl_freq) {
    const __m256i even = _mm256_mul_epu32(y, rcp);
    const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(y, 32), _mm256_srli_epi64(rcp, 32));
    const __m256i high = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
    const __m256i quot = _mm256_srlv_epi32(high, rcp_shift);
    return _mm256_add_epi32(_mm256_add_epi32(y, bias), _mm256_mullo_epi32(quot, cmpl_freq));
}

// One symbol on each of 8 states x; words stored below p (store_words).
__attribute__((target("avx2"), always_inline)) inline void put8(__m256i& x, const Fields& f, uint8_t*& p) {
    const __m256i m = _mm256_cmpeq_epi32(_mm256_max_epu32(x, f.x_max), x);  // x >= x_max
    store_words(x, static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(m))), p);
    const __m256i y = _mm256_blendv_epi8(x, _mm256_srli_epi32(x, 16), m);
    x = step(y, f.rcp, _mm256_srli_epi32(f.cs, 16), f.bias, _mm256_and_si256(f.cs, _mm256_set1_epi32(0xFFFF)));
}

}  // namespace ptwm::srans::avx2
#endif
