#pragma once

// AVX2 pieces of the static rANS decoders' rounds (f8-tables' state-signs
// layout, fp4-tables' wide layout), 8 states a vector: the slot tables'
// fill, the table lookups and the renormalisation. The AVX-512 rounds have their own
// (static_rans.hpp).
#if defined(__x86_64__)
#include <immintrin.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "codecs/static_rans.hpp"

namespace ptwm::srans::avx2 {

// How the rounds look up their 8 table words: 8 for vpgatherdd, 1 for
// eight scalar loads; 0 (the default) for the CPU's choice: vpgatherdd on
// Intel, loads elsewhere. Tests force each.
inline std::atomic<unsigned> g_gather_lanes{0};
inline bool gathers_by_loads() {
    static const bool intel = __builtin_cpu_is("intel");
    const unsigned forced = g_gather_lanes.load(std::memory_order_relaxed);
    return forced ? forced == 1 : !intel;
}

// Eight table words t[(idx & m) | off[k]] (lane k; no offsets where off is
// null) by eight scalar loads, the indices taken out 64 bits at a time,
// two lanes a word, and masked and offset there, a word at a time. On
// AMD's Zen 3 a vpgatherdd of 8 lanes takes some 12 cycles of throughput,
// and these loads some 7: with them f8-tables' AVX2 decoder took 12-14%
// less time on the derived E5M2 and per-channel FP8 files (their whole
// in-memory decode). Intel's gathers (4-5 cycles since Skylake) stay the
// faster there.
__attribute__((target("avx2"), always_inline)) inline __m256i gather8_by_loads(const uint32_t* t, __m256i idx,
                                                                               uint32_t m = ~0u,
                                                                               const uint32_t* off = nullptr) {
    const __m128i lo = _mm256_castsi256_si128(idx), hi = _mm256_extracti128_si256(idx, 1);
    const uint64_t both = m * uint64_t{0x100000001};
    const auto pair = [both, off](uint64_t w, unsigned k) {
        w &= both;
        if (off) {
            uint64_t o;
            std::memcpy(&o, off + 2 * k, 8);  // lanes 2k and 2k + 1, little-endian as in the vector
            w |= o;
        }
        return w;
    };
    const uint64_t a = pair(static_cast<uint64_t>(_mm_cvtsi128_si64(lo)), 0);
    const uint64_t b = pair(static_cast<uint64_t>(_mm_extract_epi64(lo, 1)), 1);
    const uint64_t c = pair(static_cast<uint64_t>(_mm_cvtsi128_si64(hi)), 2);
    const uint64_t d = pair(static_cast<uint64_t>(_mm_extract_epi64(hi, 1)), 3);
    const auto at = [t](uint64_t k) { return static_cast<int>(t[static_cast<uint32_t>(k)]); };
    return _mm256_setr_epi32(at(a), at(a >> 32), at(b), at(b >> 32), at(c), at(c >> 32), at(d), at(d >> 32));
}

template <bool ByLoads>
__attribute__((target("avx2"), always_inline)) inline __m256i gather8(const uint32_t* t, __m256i idx) {
    if constexpr (ByLoads)
        return gather8_by_loads(t, idx);
    else
        return _mm256_i32gather_epi32(reinterpret_cast<const int*>(t), idx, 4);
}

// The table words of 8 states' slots, t[(x & m) | off[k]] (no offsets
// where off is null). By loads, the slot mask and the offsets are taken on
// the integer side, which has room where the vector pipes are the rounds'
// bound: a 64-state round of f8-tables took some 7% less time (a
// microbenchmark on Zen 4), with column classes' offsets as well.
template <bool ByLoads>
__attribute__((target("avx2"), always_inline)) inline __m256i gather8_slots(const uint32_t* t, __m256i x, uint32_t m,
                                                                            const uint32_t* off = nullptr) {
    if constexpr (ByLoads) {
        return gather8_by_loads(t, x, m, off);
    } else {
        __m256i idx = _mm256_and_si256(x, _mm256_set1_epi32(static_cast<int>(m)));
        if (off) idx = _mm256_or_si256(idx, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(off)));
        return gather8<false>(t, idx);
    }
}

// One symbol's run of f slot words, head | k << Shift for k = 0 .. f - 1,
// eight a store, the words one add apart: up to 7 words past the run, which
// the next run (filled after it) or the caller's slack takes. (The
// compilers' build of such a loop peels every group for alignment: on Zen 3
// the slot tables were 4% of the derived E5M2 files' decode, 8% of esrgan
// MXFP4's.)
template <unsigned Shift>
__attribute__((target("avx2"), always_inline)) inline void fill_run(uint32_t* run, uint32_t f, uint32_t head) {
    static_assert(Shift + 12 <= 32, "a run's offset (under 2^12) fits above Shift");
    __m256i v = _mm256_or_si256(_mm256_set1_epi32(static_cast<int>(head)),
                                _mm256_setr_epi32(0, 1 << Shift, 2 << Shift, 3 << Shift, 4 << Shift, 5 << Shift,
                                                  6 << Shift, 7 << Shift));
    const __m256i next = _mm256_set1_epi32(8 << Shift);
    for (uint32_t k = 0; k < f; k += 8, v = _mm256_add_epi32(v, next))
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(run + k), v);
}

// For 8 states of which those in mask m renormalise: per state, the bytes
// of the 16 at p that make its word (the t-th word, t the number of set
// bits below it), zero-extended; 0x80 (a zero byte) for the rest. Both
// 128-bit halves index the same 16 bytes, broadcast. 8 KiB beside the
// slot words, where vpermd's indices took 2 (8-byte entries, widened).
struct RenormShuffles {
    alignas(64) std::array<std::array<uint8_t, 32>, 256> control{};
    constexpr RenormShuffles() {
        for (unsigned m = 0; m < 256; ++m)
            for (unsigned k = 0, taken = 0; k < 8; ++k) {
                const bool takes = m >> k & 1;
                control[m][4 * k] = takes ? static_cast<uint8_t>(2 * taken) : 0x80;
                control[m][4 * k + 1] = takes ? static_cast<uint8_t>(2 * taken + 1) : 0x80;
                control[m][4 * k + 2] = control[m][4 * k + 3] = 0x80;
                taken += takes;
            }
    }
};
inline constexpr RenormShuffles kRenormShuffles{};

// 8 states (below 2^31) that fell below kLow take the next 16-bit words
// from p, in lane order, by one byte shuffle of the next 8 (broadcast to
// both halves). Reads 16 bytes at p whatever it takes: the caller keeps
// that much payload in front of it.
__attribute__((target("avx2"), always_inline)) inline __m256i renormalize16(__m256i x, const uint8_t*& p) {
    // x - 2^15 is negative exactly where x is below 2^15 (states are below
    // 2^31: no overflow), and both movemask and blendvps read only each
    // lane's sign bit: one op where GCC made the compare a vpminsd and a
    // vpcmpeqd. With a 64-bit popcount (which drops an add and a sign
    // extension for p's step), 6 instructions less a vector; the derived
    // E5M2 files decoded 1-2% faster on Zen 3. The words by vpshufb of a
    // broadcast load, not vpermd of a widening load with an index widened
    // by another: one shuffle a vector where there were three (on Zen 4
    // shuffles share two pipes with the shifts and the multiply). Forced
    // to AVX2 there, the column-class and one-class FP8 files and the FP4
    // files decoded 2-5% faster, the row-class ones (their chunks' slot
    // words at the 32 KiB budget more often) within 2% either way.
    const __m256 below = _mm256_castsi256_ps(_mm256_sub_epi32(x, _mm256_set1_epi32(static_cast<int>(kLow))));
    const auto m = static_cast<uint64_t>(static_cast<unsigned>(_mm256_movemask_ps(below)));
    const __m256i next = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i w =
        _mm256_shuffle_epi8(next, _mm256_load_si256(reinterpret_cast<const __m256i*>(kRenormShuffles.control[m].data())));
    p += 2 * static_cast<size_t>(__builtin_popcountll(m));
    return _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(x), _mm256_castsi256_ps(_mm256_or_si256(_mm256_slli_epi32(x, 16), w)), below));
}

}  // namespace ptwm::srans::avx2
#endif
