#include "codecs/fp4_tables.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#define PTWM_FP4_WIDE_AVX512 1
#endif

#include "base/cpu_features.hpp"
#include "base/varint.hpp"
#include "codecs/static_rans.hpp"
#include "codecs/rans_decode_avx2.hpp"
#include "codecs/rans_encode_avx2.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/planes/fp4_groups.hpp"

namespace ptwm::fp4tables {
namespace {

constexpr unsigned kAlphabet = 16;  // one FP4 value
constexpr unsigned kMaxGroups = 16;
// 16 symbols need no finer tables: at 10 bits the rounding costs some
// 0.001 bits a value. Up to 12 bits a slot's offset fits the fused decode
// entry below.
constexpr unsigned kMinPrec = srans::kMinPrec, kMaxPrec = 12;
static_assert(kMinPrec >= 10 && kMaxPrec <= 12);
constexpr size_t kHeaderBytes = 4;  // flags (kind, wide), base, groups, precision
// Byte 0: bit 0 the kind, bit 1 the wide layout.
constexpr uint8_t kWideFlag = 2;
// The wide layout: 32 states, which an AVX-512 decoder steps at once (an MX
// block's 32 values, or two NV blocks, a round: one table per 16 lanes).
// The states start from the last values, 7 a state above 2^28 (2^30 in
// stores without packed states), so they carry 28 bits of data each
// instead of starting empty at 2^15: 32 states cost about as much as 4 did
// (f8-tables' state-signs layout, for nibbles). A start state's bits
// beyond its values are lost to the stream: above 2^30, 2.2 bits a state;
// above 2^28, 0.5.
constexpr unsigned kWideLanes = 32;
constexpr unsigned kRawPerState = 7;
constexpr uint32_t kRawBase = 1u << 28, kWordsRawBase = 1u << 30;
constexpr uint32_t raw_base(srans::States states) { return states == srans::States::packed ? kRawBase : kWordsRawBase; }
// Chunks of blocks from this size take the wide layout. Its states cost
// some 40 bytes a chunk more than 4 states with four-byte states (the final
// states hold about 11 bits each beyond what they started with, and the
// 224 values in them are raw; packed, some 15): on the corpus's FP4 files
// 0.17% of the values, for 2.5 times the decode speed (270 -> 650-690 MB/s
// of blocks). Below this size a chunk is mostly those 224 values.
constexpr size_t kWideMinBytes = 4096;
// Byte 0 bit 2, the split layout (wide chunks only): 2 to kMaxStreams wide
// streams, each over a part of the chunk's blocks (part k: blocks
// [k m / K, (k + 1) m / K) of m), behind their count K and the lengths of
// all but the last (varints). One stream's 32 states are two chains of 16
// a round, and a round waits on its table lookups and multiplies (six more
// chains in the same loop cost no more time): the decoder steps the
// streams together. A stream's states cost some 20 bytes (packed; 50 with
// four-byte states), so writers take two streams from 32 KiB of blocks
// (at most 0.06% of them; from 64 KiB with four-byte states): the
// corpus's esrgan MXFP4 / NVFP4 files decode 4-6% faster than with 64 KiB,
// for 0.02% (from 16 KiB: 7-10% for 0.07%). On a
// [2880, 5760] MXFP4 tensor in memory, one thread: 0.9 GB/s with one
// stream, 1.15 with two; four measured -4% to +8% against two (the loop is
// then bound by its permutes, not its chains) and took a synthetic NVFP4
// tensor of that shape, whose values code only 0.05% below their order-0
// bound, above it. The decoder takes any K up to kMaxStreams.
constexpr uint8_t kSplitFlag = 4;
// Byte 0 bit 3: the rANS streams' final states are packed (srans::States),
// in every layout, and the wide layout's start at kRawBase; the encoder
// always sets it. Without it (stores written before) the final states take
// four bytes each and the wide ones start at kWordsRawBase.
constexpr uint8_t kPackedStatesFlag = 8;
constexpr unsigned kMaxStreams = 4;
constexpr size_t kSplitMinBytes = 32u << 10;
// Tests and fuzz seeds move them (split_from).
std::atomic<unsigned> g_split_streams{2};
std::atomic<size_t> g_split_min{kSplitMinBytes};
// Tests: false writes four-byte final states (and starts above
// kWordsRawBase), as stores written before packed states.
std::atomic<bool> g_packed_states{true};

// The first block of part k of K over m blocks.
size_t part_begin(size_t m, unsigned streams, unsigned k) { return static_cast<size_t>(uint64_t{m} * k / streams); }

// What a group's table costs while the grouping is searched (the real
// tables are weighed once it is chosen): 16 codes of a few bits.
constexpr double kTableBitsGuess = 64;

using Counts = std::array<uint64_t, kAlphabet>;

uint8_t context(Kind k, uint8_t scale) { return scale_context(k == Kind::nv, scale); }

struct Grouping {
    uint8_t base = 0;
    uint8_t groups = 1;
    unsigned group(uint8_t ctx) const {
        return static_cast<unsigned>(std::clamp(int{ctx} - int{base}, 0, int{groups} - 1));
    }
};

// The group of every scale byte, once a chunk.
std::array<uint8_t, 256> group_table(Kind k, const Grouping& g) {
    std::array<uint8_t, 256> t;
    for (unsigned s = 0; s < 256; ++s) t[s] = static_cast<uint8_t>(g.group(context(k, static_cast<uint8_t>(s))));
    return t;
}

double entropy_bits(const Counts& c) {
    uint64_t n = 0;
    double sum = 0;
    for (uint64_t k : c)
        if (k) n += k, sum += srans::k_log2_k(k);
    return n ? srans::k_log2_k(n) - sum : 0;
}

Counts add(Counts a, const Counts& b) {
    for (unsigned s = 0; s < kAlphabet; ++s) a[s] += b[s];
    return a;
}

// The grouping whose groups' entropies, plus a guess at their tables, are
// least. Groups are runs of contexts: [lo, base], base + 1, ...,
// [base + groups - 1, hi], so each candidate's cost adds up from the
// entropies of the runs from lo, the runs to hi and single contexts.
Grouping choose_grouping(const std::array<Counts, 256>& per_ctx, unsigned lo, unsigned hi) {
    const unsigned w = hi - lo + 1;
    std::vector<double> from_lo(w), to_hi(w), single(w);
    std::vector<bool> present(w);
    Counts run{};
    for (unsigned i = 0; i < w; ++i) {
        run = add(run, per_ctx[lo + i]);
        from_lo[i] = entropy_bits(run);
        single[i] = entropy_bits(per_ctx[lo + i]);
        present[i] = std::any_of(per_ctx[lo + i].begin(), per_ctx[lo + i].end(), [](uint64_t k) { return k != 0; });
    }
    run = {};
    for (unsigned i = w; i-- > 0;) run = add(run, per_ctx[lo + i]), to_hi[i] = entropy_bits(run);
    // Prefix sums of the single contexts' costs (a table each where present).
    std::vector<double> single_sum(w + 1, 0);
    for (unsigned i = 0; i < w; ++i) single_sum[i + 1] = single_sum[i] + single[i] + (present[i] ? kTableBitsGuess : 0);

    Grouping best{static_cast<uint8_t>(lo), 1};
    double best_bits = from_lo[w - 1] + kTableBitsGuess;
    // groups >= 2: group 0 = [lo, b], groups 1..G-2 single, group G-1 = [b + G - 1, hi].
    for (unsigned b = 0; b + 1 < w; ++b)
        for (unsigned g = 2; g <= kMaxGroups && b + g - 1 < w; ++g) {
            const unsigned top = b + g - 1;
            const double bits = from_lo[b] + kTableBitsGuess + (single_sum[top] - single_sum[b + 1]) + to_hi[top] +
                                kTableBitsGuess;
            if (bits < best_bits) best_bits = bits, best = {static_cast<uint8_t>(lo + b), static_cast<uint8_t>(g)};
        }
    return best;
}

// The values of each scale context's blocks, counted. Counting values
// increments two counters a byte, in chains of dependent increments where
// values repeat: that loop was three quarters of the encoder's own time.
// Counting bytes increments one counter a byte, and the value counts come
// from it at the end, a fold of 256 counts a context -- worth it from
// kByteCountMin bytes a context in the chunk's range.
constexpr size_t kByteCountMin = 2048;

std::array<Counts, 256> count_values(std::span<const uint8_t> blocks, std::span<const uint8_t> scales, Kind kind, unsigned lo,
                                     unsigned hi) {
    const unsigned bb = block_bytes(kind);
    std::array<Counts, 256> per_ctx{};
    const unsigned width = hi - lo + 1;
    if (blocks.size() < kByteCountMin * width) {
        for (size_t b = 0; b < scales.size(); ++b) {
            Counts& h = per_ctx[context(kind, scales[b])];
            for (const uint8_t* p = blocks.data() + b * bb; p != blocks.data() + (b + 1) * bb; ++p) ++h[*p & 15], ++h[*p >> 4];
        }
        return per_ctx;
    }
    // 32-bit counts: a chunk holds at most 2^28 blocks (kMaxChunkBytes).
    // Four tables a context, byte k of a block in table k mod 4, so equal
    // neighbouring bytes do not wait on each other's increment.
    // (Cleared by memset: assign(n, {}) copied a zero array into each
    // table, a rep movs of 1 KiB apiece, 5% of this function's time.)
    thread_local std::vector<std::array<uint32_t, 256>> t_bytes;
    t_bytes.resize(4 * width);
    std::memset(t_bytes.data(), 0, t_bytes.size() * sizeof(t_bytes[0]));
    // The block size a compile-time constant (16 bytes MXFP4, 8 NVFP4): the
    // loop over a block's bytes unrolls whole, where as a loop of two or
    // four rounds its counter and branch came between the increments
    // (with the memset: count_values 5.4% -> 4.6% of the corpus esrgan
    // MXFP4 file's pack time).
    const auto count_blocks = [&]<unsigned BB>() {
        for (size_t b = 0; b < scales.size(); ++b) {
            std::array<uint32_t, 256>* h = &t_bytes[4 * (scale_context(BB == 8, scales[b]) - lo)];  // (BB 8: NVFP4)
            const uint8_t* p = blocks.data() + b * BB;
            for (unsigned k = 0; k < BB; k += 4) ++h[0][p[k]], ++h[1][p[k + 1]], ++h[2][p[k + 2]], ++h[3][p[k + 3]];
        }
    };
    if (bb == 8) count_blocks.template operator()<8>();
    else count_blocks.template operator()<16>();
    for (unsigned c = 0; c < width; ++c) {
        Counts& n = per_ctx[lo + c];
        for (unsigned v = 0; v < 256; ++v) {
            const uint64_t k = uint64_t{t_bytes[4 * c][v]} + t_bytes[4 * c + 1][v] + t_bytes[4 * c + 2][v] + t_bytes[4 * c + 3][v];
            n[v & 15] += k, n[v >> 4] += k;
        }
    }
    return per_ctx;
}

// A decode table: one word a slot, the symbol, the slot's offset in it
// and its frequency: x = freq * (x >> prec) + offset in one load.
using Slots = std::vector<uint32_t>;

void fill_slots(const srans::Table& t, uint32_t* slots) {
    for (unsigned s = 0; s < kAlphabet; ++s)
        for (uint32_t k = 0; k < t.freq[s]; ++k) slots[t.cum[s] + k] = t.freq[s] << 16 | k << 4 | s;
}

// A group's table as the wide layout's SIMD decoder holds it, without the
// 2^prec slot words (whose gathers bound the decoder: some 20 cycles for
// 16 words on Zen 4). The slots fall into 32 buckets; a slot's symbol is
// the symbol at its bucket's first slot, or the last symbol that starts
// within the bucket at or before the slot. Up to kMaxBucketStarts such
// starts a bucket, each as start << 4 | symbol (so that one compare with
// slot << 4 | 15 tells whether the slot is past it); a table with more
// keeps the slots.
// (No initialisers: lane_table writes every field, and decode_payload keeps
// sixteen of these, 14 KiB, on the stack of every chunk's decode, most of
// which never use them.)
constexpr unsigned kBuckets = 32, kMaxBucketStarts = 5;
struct alignas(64) LaneTable {
    std::array<uint32_t, kAlphabet> cum, freq;
    std::array<uint32_t, kBuckets> first;
    std::array<std::array<uint32_t, kBuckets>, kMaxBucketStarts> starts;  // in order; ~0 where none
};

// The symbol whose slots hold `slot`: how many of symbols 1..15 start at or
// before it (cum never falls, so those are exactly the symbols before it).
inline unsigned symbol_of(const std::array<uint32_t, kAlphabet>& cum, uint32_t slot) {
    unsigned s = 0;
    for (unsigned k = 1; k < kAlphabet; ++k) s += cum[k] <= slot;
    return s;
}

// The most starts a bucket holds (the decoder's compares), or
// kMaxBucketStarts + 1 where that is more than the table has room for.
unsigned lane_table(const srans::Table& t, unsigned prec, LaneTable& l) {
    for (unsigned s = 0; s < kAlphabet; ++s) l.cum[s] = t.cum[s], l.freq[s] = t.freq[s];
    const uint32_t width = (1u << prec) / kBuckets;
    unsigned most = 0;
    for (unsigned b = 0; b < kBuckets; ++b) {
        const uint32_t from = b * width;
        l.first[b] = symbol_of(l.cum, from);
        unsigned n = 0;
        for (unsigned k = 1; k < kAlphabet; ++k)
            if (l.freq[k] && l.cum[k] > from && l.cum[k] < from + width) {
                if (n == kMaxBucketStarts) return kMaxBucketStarts + 1;
                l.starts[n++][b] = l.cum[k] << 4 | k;
            }
        most = std::max(most, n);
        for (; n < kMaxBucketStarts; ++n) l.starts[n][b] = ~0u;
    }
    return most;
}

// One value from state x: the table load and update. (Renormalisation
// follows for all four states together, so the four loads and updates are
// independent and only the cursor moves from state to state.)
template <unsigned Prec>
[[gnu::always_inline]] inline unsigned take(uint32_t& x, const uint32_t* t) {
    const uint32_t e = t[x & ((1u << Prec) - 1)];
    x = (e >> 16) * (x >> Prec) + ((e >> 4) & 0xFFF);
    return e & 15;
}

// A state takes in at most one word; the caller knows two bytes remain.
[[gnu::always_inline]] inline void refill_unchecked(uint32_t& x, const uint8_t*& p) {
    const uint32_t in = x < srans::kLow;
    uint16_t word;
    std::memcpy(&word, p, 2);
    x = x << (in << 4) | (word & (0u - in));  // arithmetic: a branch here mispredicts
    p += in << 1;
}

[[gnu::always_inline]] inline void refill_checked(uint32_t& x, const uint8_t*& p, const uint8_t* end) {
    if (x >= srans::kLow) return;
    if (end - p < 2) throw CorruptData("fp4-tables: stream runs past the payload");
    x = x << 16 | uint32_t{p[0]} | uint32_t{p[1]} << 8;
    p += 2;
}

// The blocks, each under its group's slots.
template <unsigned Prec>
void decode_blocks(std::span<const uint8_t> scales, const std::array<uint8_t, 256>& group, const uint32_t* slots, unsigned bb,
                   srans::DecodeState<>& d, uint8_t* o) {
    // Locals, not d's members: the byte stores below may alias anything
    // reachable through a pointer, and would force them back to memory.
    const uint8_t* p = d.p;
    const uint8_t* const end = d.end;
    uint32_t x0 = d.x[0], x1 = d.x[1], x2 = d.x[2], x3 = d.x[3];
    for (size_t b = 0; b < scales.size(); ++b, o += bb) {
        const uint32_t* t = slots + (size_t{group[scales[b]]} << Prec);
        // A block moves at most one word a value.
        const bool room = static_cast<size_t>(end - p) >= 4 * size_t{bb};
        for (unsigned k = 0; k < bb; k += 2) {
            const unsigned v0 = take<Prec>(x0, t), v1 = take<Prec>(x1, t);
            const unsigned v2 = take<Prec>(x2, t), v3 = take<Prec>(x3, t);
            if (room) {
                refill_unchecked(x0, p), refill_unchecked(x1, p), refill_unchecked(x2, p), refill_unchecked(x3, p);
            } else {
                refill_checked(x0, p, end), refill_checked(x1, p, end), refill_checked(x2, p, end),
                    refill_checked(x3, p, end);
            }
            o[k] = static_cast<uint8_t>(v0 | v1 << 4);
            o[k + 1] = static_cast<uint8_t>(v2 | v3 << 4);
        }
    }
    d.x = {x0, x1, x2, x3};
    d.p = p;
}

// Value i of packed blocks: the low nibble of byte i / 2 first.
inline unsigned value_at(const uint8_t* blocks, size_t i) { return blocks[i >> 1] >> (4 * (i & 1)) & 15; }

// Stores value i; values come in order, so the low nibble's store sets the
// byte and the high nibble's adds to it.
inline void put_value(uint8_t* out, size_t i, unsigned v) {
    if (i & 1) out[i >> 1] = static_cast<uint8_t>(out[i >> 1] | v << 4);
    else out[i >> 1] = static_cast<uint8_t>(v);
}

// One wide stream and the blocks it codes, as the decoder goes through it:
// values [0, i) are out.
struct WidePart {
    srans::DecodeState<kWideLanes> d;
    std::span<const uint8_t> scales;
    std::span<uint8_t> out;
    uint32_t raw_base;  // what the final states hold the last values above
    size_t values, coded, i = 0;
    WidePart(std::span<const uint8_t> stream, srans::States states, std::span<const uint8_t> sc, std::span<uint8_t> o)
        : d(stream, states), scales(sc), out(o), raw_base(fp4tables::raw_base(states)),
          values(2 * o.size()),
          coded(values - std::min<size_t>(values, kRawPerState * kWideLanes)) {}
};

cpu::SimdGate g_simd;
// false: the SIMD decoder gathers from the slots (tests).
std::atomic<bool> g_lane_tables_allowed{true};

#ifdef PTWM_FP4_WIDE_AVX512
bool has_avx512() { return g_simd.avx512(); }

// AVX2 without AVX-512: the wide layout's AVX2 encoder and decoder, and the
// slot tables' fill.
bool has_avx2() { return g_simd.avx2(); }

// GCC 12 warns inside its own avx512fintrin.h (its undefined-vector idiom).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// A round's 32 values as 16 bytes: values 2j, 2j + 1 sit in the two halves
// of a 64-bit lane, and the byte is the low one | the high one << 4.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void put_round_avx512(uint8_t* out, __m512i v0,
                                                                                                __m512i v1) {
    const __m128i b0 = _mm512_cvtepi64_epi8(_mm512_or_si512(v0, _mm512_srli_epi64(v0, 28)));
    const __m128i b1 = _mm512_cvtepi64_epi8(_mm512_or_si512(v1, _mm512_srli_epi64(v1, 28)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_unpacklo_epi64(b0, b1));
}

// Whole rounds of 32 values (16 bytes) of N streams together, each from
// value i on, while every stream has a round left and room in its payload
// for a word per state. Each 16 lanes take one table (MX: both halves of a
// block; NV: one block each): step(x, g) moves 16 states on under group g's
// table and returns their values. All the streams' steps, then all their
// renormalisations: 2N chains of lookups and multiplies in flight.
template <unsigned N, class Step>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void decode_wide_rounds_avx512(
    const Step& step, const std::array<uint8_t, 256>& group, bool nv, WidePart* const* w) {
    __m512i x[N][2];
    const uint8_t* p[N];
    size_t coded = w[0]->coded;
#pragma GCC unroll 4
    for (unsigned k = 0; k < N; ++k) {
        x[k][0] = _mm512_loadu_si512(w[k]->d.x.data());
        x[k][1] = _mm512_loadu_si512(w[k]->d.x.data() + 16);
        p[k] = w[k]->d.p;
        coded = std::min(coded, w[k]->coded);
    }
    const auto room = [&] {
        bool all = true;
#pragma GCC unroll 4
        for (unsigned k = 0; k < N; ++k) all &= w[k]->d.end - p[k] >= 64;
        return all;
    };
    size_t i = w[0]->i;
    for (; i + 32 <= coded && room(); i += 32) {
        const size_t blk = nv ? i >> 4 : i >> 5;
        __m512i v[N][2];
#pragma GCC unroll 4
        for (unsigned k = 0; k < N; ++k) {
            const unsigned g0 = group[w[k]->scales[blk]], g1 = nv ? group[w[k]->scales[blk + 1]] : g0;
            v[k][0] = step(x[k][0], g0), v[k][1] = step(x[k][1], g1);
        }
#pragma GCC unroll 4
        for (unsigned k = 0; k < N; ++k) {
            x[k][0] = srans::renormalize16_avx512(x[k][0], p[k]);
            x[k][1] = srans::renormalize16_avx512(x[k][1], p[k]);
        }
#pragma GCC unroll 4
        for (unsigned k = 0; k < N; ++k) put_round_avx512(w[k]->out.data() + i / 2, v[k][0], v[k][1]);
    }
#pragma GCC unroll 4
    for (unsigned k = 0; k < N; ++k) {
        _mm512_storeu_si512(w[k]->d.x.data(), x[k][0]);
        _mm512_storeu_si512(w[k]->d.x.data() + 16, x[k][1]);
        w[k]->d.p = p[k];
        w[k]->i = i;
    }
}

// A step whose tables are gathered from the slots.
struct GatherStep {
    const uint32_t* slots;
    unsigned prec;
    __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) __m512i operator()(__m512i& x, unsigned g) const {
        const __m512i mask = _mm512_set1_epi32(static_cast<int>((1u << prec) - 1));
        const __m512i idx = _mm512_add_epi32(_mm512_and_si512(x, mask), _mm512_set1_epi32(static_cast<int>(g << prec)));
        const __m512i e = _mm512_i32gather_epi32(idx, slots, 4);
        x = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_srli_epi32(e, 16), _mm512_srl_epi32(x, _mm_cvtsi32_si128(static_cast<int>(prec)))),
                             _mm512_and_si512(_mm512_srli_epi32(e, 4), _mm512_set1_epi32(0xFFF)));
        return _mm512_and_si512(e, _mm512_set1_epi32(0xF));
    }
};

__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512i bucket_lookup_avx512(
    const std::array<uint32_t, kBuckets>& v, __m512i bucket) {
    return _mm512_permutex2var_epi32(_mm512_load_si512(v.data()), bucket, _mm512_load_si512(v.data() + 16));
}

// A step whose tables are in registers (LaneTable), with up to Starts
// symbol starts a bucket.
template <unsigned Starts>
struct LaneStep {
    const LaneTable* tables;
    unsigned prec;
    __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) __m512i operator()(__m512i& x, unsigned g) const {
        const LaneTable& t = tables[g];
        const __m512i slot = _mm512_and_si512(x, _mm512_set1_epi32(static_cast<int>((1u << prec) - 1)));
        const __m512i bucket = _mm512_srl_epi32(slot, _mm_cvtsi32_si128(static_cast<int>(prec - std::bit_width(kBuckets - 1))));
        // The symbol: the bucket's first, or the last start at or before
        // the slot (start << 4 | symbol <= slot << 4 | 15).
        const __m512i key = _mm512_or_si512(_mm512_slli_epi32(slot, 4), _mm512_set1_epi32(15));
        __m512i s = bucket_lookup_avx512(t.first, bucket);
        for (unsigned k = 0; k < Starts; ++k) {
            const __m512i start = bucket_lookup_avx512(t.starts[k], bucket);
            s = _mm512_mask_mov_epi32(s, _mm512_cmpge_epu32_mask(key, start), start);
        }
        s = _mm512_and_si512(s, _mm512_set1_epi32(15));
        const __m512i f = _mm512_permutexvar_epi32(s, _mm512_load_si512(t.freq.data()));
        const __m512i first_slot = _mm512_permutexvar_epi32(s, _mm512_load_si512(t.cum.data()));
        x = _mm512_add_epi32(_mm512_mullo_epi32(f, _mm512_srl_epi32(x, _mm_cvtsi32_si128(static_cast<int>(prec)))),
                             _mm512_sub_epi32(slot, first_slot));
        return s;
    }
};

// The SIMD rounds: with the tables in registers where every table fits
// (`lanes`, `starts` its buckets' most starts), else gathered.
template <unsigned N>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void decode_wide_avx512(
    const uint32_t* slots, const LaneTable* lanes, unsigned starts, unsigned prec, const std::array<uint8_t, 256>& group,
    bool nv, WidePart* const* w) {
    if (!lanes) return decode_wide_rounds_avx512<N>(GatherStep{slots, prec}, group, nv, w);
    switch (starts) {
        case 0:
        case 1: return decode_wide_rounds_avx512<N>(LaneStep<1>{lanes, prec}, group, nv, w);
        case 2: return decode_wide_rounds_avx512<N>(LaneStep<2>{lanes, prec}, group, nv, w);
        case 3: return decode_wide_rounds_avx512<N>(LaneStep<3>{lanes, prec}, group, nv, w);
        case 4: return decode_wide_rounds_avx512<N>(LaneStep<4>{lanes, prec}, group, nv, w);
        default: return decode_wide_rounds_avx512<N>(LaneStep<kMaxBucketStarts>{lanes, prec}, group, nv, w);
    }
}

// The wide layout's encoder, 16 states under one table of 16 symbols: the
// symbols' coding fields are in-register permutes of that table (no
// gathers), and the words of the states that renormalise are stored
// compressed, in lane order, below the cursor. `t`: the table's fields,
// 16 lanes each of x_max, rcp_freq, bias, cmpl_freq | rcp_shift << 16.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void encode_step_avx512(
    __m512i& xv, const uint32_t* t, __m512i v, uint16_t*& q) {
    const __m512i x_max = _mm512_permutexvar_epi32(v, _mm512_loadu_si512(t));
    const __m512i rcp = _mm512_permutexvar_epi32(v, _mm512_loadu_si512(t + 16));
    const __m512i bias = _mm512_permutexvar_epi32(v, _mm512_loadu_si512(t + 32));
    const __m512i cs = _mm512_permutexvar_epi32(v, _mm512_loadu_si512(t + 48));
    const __mmask16 m = _mm512_cmpge_epu32_mask(xv, x_max);
    const unsigned n = static_cast<unsigned>(__builtin_popcount(m));
    q -= n;
    _mm256_mask_storeu_epi16(q, static_cast<__mmask16>((1u << n) - 1),
                             _mm512_cvtepi32_epi16(_mm512_maskz_compress_epi32(m, xv)));
    xv = _mm512_mask_srli_epi32(xv, m, xv, 16);
    // The high half of x * rcp, even and odd lanes apart.
    const __m512i even = _mm512_mul_epu32(xv, rcp);
    const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(xv, 32), _mm512_srli_epi64(rcp, 32));
    const __m512i high = _mm512_or_si512(_mm512_srli_epi64(even, 32),
                                         _mm512_and_si512(odd, _mm512_set1_epi64(static_cast<long long>(0xFFFFFFFF00000000ull))));
    const __m512i quot = _mm512_srlv_epi32(high, _mm512_srli_epi32(cs, 16));
    xv = _mm512_add_epi32(_mm512_add_epi32(xv, bias), _mm512_mullo_epi32(quot, _mm512_and_si512(cs, _mm512_set1_epi32(0xFFFF))));
}

// Values 2j, 2j + 1 of 8 bytes: byte j twice, then its low and high nibble.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512i values_avx512(const uint8_t* bytes) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes));
    const __m512i nibble = _mm512_set_epi32(4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0);
    return _mm512_and_si512(_mm512_srlv_epi32(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(b, b)), nibble), _mm512_set1_epi32(0xF));
}

// The wide layout's whole rounds of 32 values, back to front from round
// `rounds` - 1: the same words as put_word value by value.
__attribute__((target("avx512f,avx512bw,avx512vl"))) uint16_t* encode_wide_avx512(
    const std::vector<srans::EncodeSymbol>& sym, const std::array<uint8_t, 256>& group, const uint8_t* scales,
    const uint8_t* blocks, bool nv, size_t rounds, std::array<uint32_t, kWideLanes>& x, uint16_t* q) {
    const size_t groups = sym.size() / kAlphabet;
    std::vector<uint32_t> soa(groups * 4 * kAlphabet);
    for (size_t g = 0; g < groups; ++g)
        for (unsigned v = 0; v < kAlphabet; ++v) {
            const srans::EncodeSymbol& e = sym[g * kAlphabet + v];
            uint32_t* t = soa.data() + g * 4 * kAlphabet;
            t[v] = e.x_max, t[16 + v] = e.rcp_freq, t[32 + v] = e.bias;
            t[48 + v] = uint32_t{e.cmpl_freq} | uint32_t{e.rcp_shift} << 16;
        }
    __m512i x0 = _mm512_loadu_si512(x.data()), x1 = _mm512_loadu_si512(x.data() + 16);
    for (size_t r = rounds; r-- > 0;) {
        const uint8_t* bytes = blocks + 16 * r;
        const unsigned g0 = group[scales[nv ? 2 * r : r]];
        const unsigned g1 = nv ? group[scales[2 * r + 1]] : g0;
        encode_step_avx512(x1, soa.data() + g1 * 4 * kAlphabet, values_avx512(bytes + 8), q);
        encode_step_avx512(x0, soa.data() + g0 * 4 * kAlphabet, values_avx512(bytes), q);
    }
    _mm512_storeu_si512(x.data(), x0);
    _mm512_storeu_si512(x.data() + 16, x1);
    return q;
}
#pragma GCC diagnostic pop

// encode_wide_avx512 with AVX2: 8 states a vector (4 bytes, 8 values), with
// put_word's arithmetic, so the same words. A symbol's coding fields are
// looked up a byte at a time by vpshufb, whose 16-byte tables hold one byte
// of each of a group's 16 symbols: rcp_freq, and freq | bias << 13 |
// rcp_shift << 26 (at 12 bits of precision at most: freq up to 2^12, bias
// below 2^13, the shift below 12); x >= x_max is x >> (31 - prec) >= freq,
// x_max being freq << (31 - prec). Four lookups and four unpacks make a
// field's dwords for a round's 32 values: the index vector's halves hold
// the values of alternate lane quads (`pick` below), so that the unpacks
// leave vector v with values 8v .. 8v + 7 in order, as the words' compress
// wants them. Loading each lane's 16-byte EncodeSymbol and transposing
// them had cost 8 address computations, 8 loads and 12 shuffles a vector,
// which bound the round: this loop took 16.8% of movenet MXFP4's pack, now
// 11.9% (encode_wide_avx2_rounds, perf over 100 packs on one core).
static_assert(kMaxPrec <= 12, "the packed field's widths");
constexpr unsigned kWideFieldTables = 8;  // 4 bytes of rcp_freq, 4 of the packed field

// A group's tables for encode_wide_avx2: kWideFieldTables of 16 bytes,
// each twice (a 256-bit vpshufb table).
std::vector<std::array<uint8_t, 32>> wide_avx2_tables(const std::vector<srans::EncodeSymbol>& sym, unsigned prec) {
    const size_t groups = sym.size() / kAlphabet;
    std::vector<std::array<uint8_t, 32>> t(groups * kWideFieldTables);
    for (size_t g = 0; g < groups; ++g)
        for (unsigned v = 0; v < kAlphabet; ++v) {
            const srans::EncodeSymbol& e = sym[g * kAlphabet + v];
            const uint32_t f = e.x_max >> (31 - prec);  // 0 where absent (never coded)
            const uint32_t packed = f | e.bias << 13 | uint32_t{e.rcp_shift} << 26;
            for (unsigned k = 0; k < 4; ++k) {
                auto& r = t[g * kWideFieldTables + k];
                auto& d = t[g * kWideFieldTables + 4 + k];
                r[v] = r[16 + v] = static_cast<uint8_t>(e.rcp_freq >> (8 * k));
                d[v] = d[16 + v] = static_cast<uint8_t>(packed >> (8 * k));
            }
        }
    return t;
}

// A field's dwords for a round: the four byte lookups of index vector `iv`
// interleaved. NV: two blocks' tables, the low 8 bytes of each half (values
// 0-3 and 8-11 / 4-7 and 12-15) from the first block's, the high 8 from the
// second's.
template <bool NV>
__attribute__((target("avx2"), always_inline)) inline void wide_field_avx2(const std::array<uint8_t, 32>* t0,
                                                                          const std::array<uint8_t, 32>* t1, __m256i iv,
                                                                          __m256i* out) {
    __m256i b[4];
    for (int k = 0; k < 4; ++k) {
        b[k] = _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(t0[k].data())), iv);
        if constexpr (NV)
            b[k] = _mm256_blend_epi32(b[k], _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(t1[k].data())), iv),
                                      0xCC);
    }
    const __m256i a = _mm256_unpacklo_epi8(b[0], b[1]), bb = _mm256_unpackhi_epi8(b[0], b[1]);
    const __m256i c = _mm256_unpacklo_epi8(b[2], b[3]), d = _mm256_unpackhi_epi8(b[2], b[3]);
    out[0] = _mm256_unpacklo_epi16(a, c), out[1] = _mm256_unpackhi_epi16(a, c);
    out[2] = _mm256_unpacklo_epi16(bb, d), out[3] = _mm256_unpackhi_epi16(bb, d);
}

template <bool NV>
__attribute__((target("avx2"))) uint16_t* encode_wide_avx2_rounds(const std::vector<std::array<uint8_t, 32>>& tab, unsigned prec,
                                                                 const std::array<uint8_t, 256>& group, const uint8_t* scales,
                                                                 const uint8_t* blocks, size_t rounds,
                                                                 std::array<uint32_t, kWideLanes>& x, uint16_t* q) {
    __m256i xv[4];
    for (int v = 0; v < 4; ++v) xv[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.data() + 8 * v));
    uint8_t* p = reinterpret_cast<uint8_t*>(q);
    // The round's 16 bytes in both halves, then bytes {0, 1, 4, 5, 8, 9,
    // 12, 13} to the low half's first 8, {2, 3, 6, 7, ...} to the high
    // half's: each byte's two values (low nibble first) after the unpack.
    const __m256i pick = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 2, 3,
                                          6, 7, 10, 11, 14, 15);
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    const __m256i lo13 = _mm256_set1_epi32(0x1FFF);
    const __m256i one_p = _mm256_set1_epi32(static_cast<int>(1u << prec));
    const __m128i cmp_shift = _mm_cvtsi32_si128(static_cast<int>(31 - prec));
    const std::array<uint8_t, 32>* const tb = tab.data();
    for (size_t r = rounds; r-- > 0;) {
        const __m256i raw = _mm256_shuffle_epi8(
            _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks + 16 * r))), pick);
        const __m256i iv = _mm256_and_si256(_mm256_unpacklo_epi8(raw, _mm256_srli_epi16(raw, 4)), lo4);
        const std::array<uint8_t, 32>* t0 = tb + size_t{group[scales[NV ? 2 * r : r]]} * kWideFieldTables;
        const std::array<uint8_t, 32>* t1 = NV ? tb + size_t{group[scales[2 * r + 1]]} * kWideFieldTables : t0;
        __m256i rcp[4], packed[4];
        wide_field_avx2<NV>(t0, t1, iv, rcp);
        wide_field_avx2<NV>(t0 + 4, t1 + 4, iv, packed);
        for (int v = 4; v-- > 0;) {
            const __m256i x0 = xv[v];
            const __m256i f = _mm256_and_si256(packed[v], lo13);
            const __m256i keep = _mm256_cmpgt_epi32(f, _mm256_srl_epi32(x0, cmp_shift));  // x < x_max
            srans::avx2::store_words(x0, ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(keep))) & 0xFF, p);
            const __m256i y = _mm256_blendv_epi8(_mm256_srli_epi32(x0, 16), x0, keep);
            xv[v] = srans::avx2::step(y, rcp[v], _mm256_srli_epi32(packed[v], 26),
                                      _mm256_and_si256(_mm256_srli_epi32(packed[v], 13), lo13), _mm256_sub_epi32(one_p, f));
        }
    }
    for (int v = 0; v < 4; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(x.data() + 8 * v), xv[v]);
    return reinterpret_cast<uint16_t*>(p);
}

__attribute__((target("avx2"))) uint16_t* encode_wide_avx2(const std::vector<srans::EncodeSymbol>& sym, unsigned prec,
                                                          const std::array<uint8_t, 256>& group, const uint8_t* scales,
                                                          const uint8_t* blocks, bool nv, size_t rounds,
                                                          std::array<uint32_t, kWideLanes>& x, uint16_t* q) {
    const auto tab = wide_avx2_tables(sym, prec);
    return nv ? encode_wide_avx2_rounds<true>(tab, prec, group, scales, blocks, rounds, x, q)
              : encode_wide_avx2_rounds<false>(tab, prec, group, scales, blocks, rounds, x, q);
}

// A round's 32 values (four vectors of 8, each 0-15) as 16 bytes, value
// 2j in the low nibble of byte j: the values as bytes in order (packs and
// a permute), then each pair summed as a + 16 b (vpmaddubsw).
__attribute__((target("avx2"), always_inline)) inline void put_round_avx2(uint8_t* out, const __m256i* v) {
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i bytes = _mm256_permutevar8x32_epi32(
        _mm256_packus_epi16(_mm256_packus_epi32(v[0], v[1]), _mm256_packus_epi32(v[2], v[3])), order);
    const __m256i pairs = _mm256_maddubs_epi16(bytes, _mm256_set1_epi16(0x1001));
    const __m256i packed = _mm256_packus_epi16(pairs, pairs);  // each half: its 8 bytes, twice
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08)));
}

// decode_wide_rounds_avx512 with AVX2, one stream: whole rounds of 32
// values (16 bytes) from value w.i while the payload has room for a word
// per state, four vectors of 8 states, each vector's table words looked up
// from its block's group's slots (vpgatherdd, or scalar loads where
// ByLoads). Without it, CPUs without AVX-512 decoded FP4 value by value:
// on Zen 3 the esrgan MXFP4 file's decode ran at under 100 MB/s.
template <bool ByLoads>
__attribute__((target("avx2"))) void decode_wide_rounds_avx2(const uint32_t* slots, unsigned prec,
                                                            const std::array<uint8_t, 256>& group, bool nv, WidePart& w) {
    __m256i x[4];
    for (int k = 0; k < 4; ++k) x[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.d.x.data() + 8 * k));
    const uint32_t slot_mask = (1u << prec) - 1;
    const __m256i lo12 = _mm256_set1_epi32(0xFFF), lo4 = _mm256_set1_epi32(0xF);
    const __m128i sh = _mm_cvtsi32_si128(static_cast<int>(prec));
    const uint8_t* p = w.d.p;
    const uint8_t* const end = w.d.end;
    size_t i = w.i;
    for (; i + 32 <= w.coded && end - p >= 64; i += 32) {
        // MX: the round is one block; NV: two, a table for each half.
        const size_t blk = nv ? i >> 4 : i >> 5;
        const unsigned g0 = group[w.scales[blk]], g1 = nv ? group[w.scales[blk + 1]] : g0;
        __m256i v[4];
        for (int k = 0; k < 4; ++k) {
            const uint32_t* t = slots + (size_t{k < 2 ? g0 : g1} << prec);
            const __m256i e = srans::avx2::gather8_slots<ByLoads>(t, x[k], slot_mask);
            x[k] = _mm256_add_epi32(_mm256_mullo_epi32(_mm256_srli_epi32(e, 16), _mm256_srl_epi32(x[k], sh)),
                                    _mm256_and_si256(_mm256_srli_epi32(e, 4), lo12));
            v[k] = _mm256_and_si256(e, lo4);
        }
        for (int k = 0; k < 4; ++k) x[k] = srans::avx2::renormalize16(x[k], p);
        put_round_avx2(w.out.data() + i / 2, v);
    }
    for (int k = 0; k < 4; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(w.d.x.data() + 8 * k), x[k]);
    w.d.p = p;
    w.i = i;
}

// fill_slots with AVX2 (srans::avx2::fill_run).
__attribute__((target("avx2"))) void fill_slots_avx2(const srans::Table& t, uint32_t* slots) {
    for (unsigned s = 0; s < kAlphabet; ++s) srans::avx2::fill_run<4>(slots + t.cum[s], t.freq[s], t.freq[s] << 16 | s);
}
#endif

// A group's slots past its last: the AVX2 fill writes whole vectors of 8,
// whose tail the next group's fill overwrites (or no block reads).
constexpr size_t kSlotSlack = 8;

// A group's slot words; `slots` has kSlotSlack words past the group's.
void fill_group_slots(const srans::Table& t, uint32_t* slots) {
#ifdef PTWM_FP4_WIDE_AVX512
    if (has_avx2()) return fill_slots_avx2(t, slots);
#endif
    fill_slots(t, slots);
}

// The tables as a wide stream's decoder takes them.
struct WideTables {
    const std::array<uint8_t, 256>& group;
    const uint32_t* slots;
    const LaneTable* lanes;  // SIMD with the tables in registers; else slots
    unsigned starts, prec;
    Kind kind;
};

// The rest of a wide stream from value w.i on: its coded values one by
// one, then the last values from the final states.
void finish_wide(WidePart& w, const WideTables& t) {
    const unsigned per_block_shift = t.kind == Kind::nv ? 4 : 5;  // 16 or 32 values a block
    const uint8_t* p = w.d.p;
    const uint32_t mask = (1u << t.prec) - 1;
    for (size_t i = w.i; i < w.coded; ++i) {
        const unsigned g = t.group[w.scales[i >> per_block_shift]];
        uint32_t& x = w.d.x[i % kWideLanes];
        unsigned v;
        if (t.lanes) {
            const LaneTable& l = t.lanes[g];
            const uint32_t slot = x & mask;
            v = symbol_of(l.cum, slot);
            x = l.freq[v] * (x >> t.prec) + slot - l.cum[v];
        } else {
            const uint32_t e = t.slots[(size_t{g} << t.prec) | (x & mask)];
            x = (e >> 16) * (x >> t.prec) + ((e >> 4) & 0xFFF);
            v = e & 15;
        }
        refill_checked(x, p, w.d.end);
        put_value(w.out.data(), i, v);
    }
    if (p != w.d.end) throw CorruptData("fp4-tables: bytes left after the stream");
    for (unsigned j = 0; j < kWideLanes; ++j) {
        const uint32_t x = w.d.x[j];
        if (x < w.raw_base || x - w.raw_base >= (1u << (4 * kRawPerState)))
            throw CorruptData("fp4-tables: stream does not end where it started");
        uint32_t r = x - w.raw_base;
        for (unsigned b = 0; b < kRawPerState; ++b, r >>= 4) {
            const size_t at = w.coded + kRawPerState * j + b;
            if (at < w.values) put_value(w.out.data(), at, r & 15);
            else if (r & 15) throw CorruptData("fp4-tables: stream does not end where it started");
        }
    }
}

// The wide layout: the coded values, SIMD rounds then one by one, then the
// last values from the final states. Split: 2 to kMaxStreams such streams,
// each over a part of the blocks, whose SIMD rounds are stepped together
// while all have some.
void decode_wide(std::span<const uint8_t> stream, srans::States states, std::span<const uint8_t> scales,
                 std::span<uint8_t> out, bool split, const WideTables& t) {
    unsigned streams = 1;
    std::array<uint64_t, kMaxStreams> length{};
    if (split) {
        streams = static_cast<unsigned>(std::min<uint64_t>(get_varint(stream, "fp4-tables"), kMaxStreams + 1));
        if (streams < 2 || streams > kMaxStreams)
            throw CorruptData("fp4-tables: the split layout has 2 to " + std::to_string(kMaxStreams) + " streams");
        for (unsigned k = 0; k + 1 < streams; ++k) length[k] = get_varint(stream, "fp4-tables");
    }
    uint64_t rest = stream.size();
    for (unsigned k = 0; k + 1 < streams; ++k) {
        if (length[k] > rest) throw CorruptData("fp4-tables: a stream runs past the payload");
        rest -= length[k];
    }
    length[streams - 1] = rest;
    const size_t bb = block_bytes(t.kind);
    std::vector<WidePart> parts;
    parts.reserve(streams);
    for (unsigned k = 0; k < streams; ++k) {
        const size_t from = part_begin(scales.size(), streams, k), to = part_begin(scales.size(), streams, k + 1);
        parts.emplace_back(stream.first(length[k]), states, scales.subspan(from, to - from), out.subspan(from * bb, (to - from) * bb));
        stream = stream.subspan(length[k]);
    }
#ifdef PTWM_FP4_WIDE_AVX512
    if (t.lanes || has_avx512()) {
        std::array<WidePart*, kMaxStreams> w{};
        for (unsigned k = 0; k < streams; ++k) w[k] = &parts[k];
        const bool nv = t.kind == Kind::nv;
        const auto rounds = [&]<unsigned N>(WidePart* const* ws) {
            decode_wide_avx512<N>(t.slots, t.lanes, t.starts, t.prec, t.group, nv, ws);
        };
        switch (streams) {
            case 2: rounds.template operator()<2>(w.data()); break;
            case 3: rounds.template operator()<3>(w.data()); break;
            case 4: rounds.template operator()<4>(w.data()); break;
            default: break;
        }
        // Then each stream's own rounds where it has more.
        for (unsigned k = 0; k < streams; ++k) rounds.template operator()<1>(&w[k]);
    } else if (has_avx2()) {
        for (WidePart& w : parts)
            if (srans::avx2::gathers_by_loads())
                decode_wide_rounds_avx2<true>(t.slots, t.prec, t.group, t.kind == Kind::nv, w);
            else
                decode_wide_rounds_avx2<false>(t.slots, t.prec, t.group, t.kind == Kind::nv, w);
    }
#endif
    for (WidePart& w : parts) finish_wide(w, t);
}

}  // namespace

unsigned block_bytes(Kind k) { return k == Kind::nv ? 8 : 16; }

namespace {

// One wide stream of `blocks` under their `scales`: its words, coded back
// to front below `top` (which has room for a word a value and a state,
// and 16 bytes of slack below those); returns where they start, and its
// final states in `x`.
uint8_t* encode_wide_words(std::span<const uint8_t> blocks, std::span<const uint8_t> scales, Kind kind,
                           const std::vector<srans::EncodeSymbol>& sym, unsigned prec, const std::array<uint8_t, 256>& group,
                           srans::States states, uint8_t* top, std::array<uint32_t, kWideLanes>& x) {
    const unsigned bb = block_bytes(kind);
    const srans::EncodeSymbol* const sy = sym.data();
    // Back to front from states holding the last values; value i on
    // state i mod 32.
    const size_t values = 2 * blocks.size();
    const size_t raw = std::min<size_t>(values, kRawPerState * kWideLanes);
    const size_t coded = values - raw;
    for (unsigned j = 0; j < kWideLanes; ++j) {
        uint32_t r = 0;
        for (unsigned b = 0; b < kRawPerState; ++b) {
            const size_t at = coded + kRawPerState * j + b;
            if (at < values) r |= value_at(blocks.data(), at) << (4 * b);
        }
        x[j] = raw_base(states) + r;
    }
    uint8_t* p = top;
    // Block by block: a block's values share a table, and its value j
    // is on state (first value + j) mod 32 (blocks hold 32 or 16
    // values, so a block never wraps). The coded values are whole
    // blocks from 4 KiB on, any tail value by value.
    const unsigned per_block = 2 * bb;
    uint16_t* q = reinterpret_cast<uint16_t*>(p);
    auto put_value_at = [&](size_t at) {
        srans::put_word(x[at % kWideLanes], q, sy[group[scales[at / per_block]] * kAlphabet + value_at(blocks.data(), at)]);
    };
    // The values past the last whole round one by one; what is left is
    // whole rounds of 32 values, so whole blocks too (32 or 16 values).
    size_t i = coded;
    for (; i % kWideLanes; --i) put_value_at(i - 1);
#ifdef PTWM_FP4_WIDE_AVX512
    if (has_avx512()) {
        q = encode_wide_avx512(sym, group, scales.data(), blocks.data(), kind == Kind::nv, i / kWideLanes, x, q);
        i = 0;
    } else if (has_avx2()) {
        q = encode_wide_avx2(sym, prec, group, scales.data(), blocks.data(), kind == Kind::nv, i / kWideLanes, x, q);
        i = 0;
    }
#endif
    for (size_t b = i / per_block; b-- > 0;) {
        const srans::EncodeSymbol* t = sy + group[scales[b]] * kAlphabet;
        uint32_t* lane = x.data() + (b * per_block) % kWideLanes;
        const uint8_t* v = blocks.data() + b * bb;
        for (unsigned k = bb; k-- > 0;) {
            srans::put_word(lane[2 * k + 1], q, t[v[k] >> 4]);
            srans::put_word(lane[2 * k], q, t[v[k] & 15]);
        }
    }
    return reinterpret_cast<uint8_t*>(q);
}

}  // namespace

std::vector<uint8_t> encode(std::span<const uint8_t> blocks, std::span<const uint8_t> scales, Kind kind) {
    const unsigned bb = block_bytes(kind);
    if (blocks.size() != scales.size() * bb) throw Error("fp4-tables: the blocks and their scales disagree in number");

    unsigned lo = 255, hi = 0;
    for (uint8_t s : scales) {
        const uint8_t c = context(kind, s);
        lo = std::min<unsigned>(lo, c), hi = std::max<unsigned>(hi, c);
    }
    if (scales.empty()) lo = hi = 0;
    const std::array<Counts, 256> per_ctx = count_values(blocks, scales, kind, lo, hi);
    const Grouping grouping = choose_grouping(per_ctx, lo, hi);
    std::array<Counts, kMaxGroups> per_group{};
    for (unsigned c = lo; c <= hi; ++c) per_group[grouping.group(static_cast<uint8_t>(c))] =
                                          add(per_group[grouping.group(static_cast<uint8_t>(c))], per_ctx[c]);

    // The precision whose tables and coded values are smallest.
    unsigned prec = kMinPrec;
    std::vector<srans::Table> tables;
    double best_bits = std::numeric_limits<double>::infinity();
    for (unsigned pr = kMinPrec; pr <= kMaxPrec; ++pr) {
        std::vector<srans::Table> t(grouping.groups);
        double bits = 0;
        for (unsigned g = 0; g < grouping.groups; ++g) {
            t[g] = srans::table_for(per_group[g], pr);
            bits += static_cast<double>(srans::table_bits(t[g])) + (t[g].used ? srans::cost_bits(per_group[g], t[g], pr) : 0);
        }
        if (bits < best_bits) best_bits = bits, prec = pr, tables = std::move(t);
    }

    const bool wide = blocks.size() >= kWideMinBytes;
    const bool split = wide && blocks.size() >= g_split_min.load(std::memory_order_relaxed);
    const bool packed = g_packed_states.load(std::memory_order_relaxed);
    const srans::States states = packed ? srans::States::packed : srans::States::words;
    const auto flags = static_cast<uint8_t>(static_cast<uint8_t>(kind) | (wide ? kWideFlag : 0) | (split ? kSplitFlag : 0) |
                                            (packed ? kPackedStatesFlag : 0));
    std::vector<uint8_t> out = {flags, grouping.base, grouping.groups, static_cast<uint8_t>(prec)};
    {
        srans::BitWriter w(out);
        for (const srans::Table& t : tables) srans::write_table(w, t);
        w.flush();
    }
    std::vector<srans::EncodeSymbol> sym;
    sym.reserve(grouping.groups * kAlphabet);
    for (const srans::Table& t : tables) {
        const auto s = srans::encode_symbols(t, prec);
        sym.insert(sym.end(), s.begin(), s.end());
    }
    const auto group = group_table(kind, grouping);

    if (split) {
        // The stream count, the lengths of all streams but the last, the
        // streams. Their words are coded into one buffer, the last stream's
        // first, each below the next: the payload takes them in one copy.
        // (As a vector a stream, then appended, they were two copies and
        // the vectors' fresh pages: memmove was 3% of movenet MXFP4's pack.)
        const unsigned streams = g_split_streams.load(std::memory_order_relaxed);
        // One more word a state a stream: a start above 2^16 moves one out at once.
        srans::EncodeBuffer buf(2 * blocks.size() + streams * kWideLanes, kWideLanes);
        std::array<uint8_t*, kMaxStreams + 1> at{};
        std::array<std::vector<uint8_t>, kMaxStreams> head;
        at[streams] = buf.cursor();
        for (unsigned k = streams; k-- > 0;) {
            const size_t from = part_begin(scales.size(), streams, k), to = part_begin(scales.size(), streams, k + 1);
            std::array<uint32_t, kWideLanes> x;
            at[k] = encode_wide_words(blocks.subspan(from * bb, (to - from) * bb), scales.subspan(from, to - from), kind, sym,
                                      prec, group, states, at[k + 1], x);
            srans::put_states(x, head[k], states);
        }
        put_varint(out, streams);
        for (unsigned k = 0; k + 1 < streams; ++k) put_varint(out, head[k].size() + static_cast<size_t>(at[k + 1] - at[k]));
        size_t total = out.size();
        for (unsigned k = 0; k < streams; ++k) total += head[k].size() + static_cast<size_t>(at[k + 1] - at[k]);
        out.reserve(total);
        for (unsigned k = 0; k < streams; ++k) {
            out.insert(out.end(), head[k].begin(), head[k].end());
            out.insert(out.end(), at[k], at[k + 1]);
        }
        return out;
    }
    if (wide) {
        srans::EncodeBuffer buf(2 * blocks.size() + kWideLanes, kWideLanes);
        std::array<uint32_t, kWideLanes> x;
        buf.cursor() = encode_wide_words(blocks, scales, kind, sym, prec, group, states, buf.cursor(), x);
        buf.finish(x, out, states);
        return out;
    }
    const srans::EncodeSymbol* const sy = sym.data();
    // Back to front. A block's value i (low nibble of byte i / 2 first)
    // is on state i mod 4; blocks hold a multiple of four values.
    srans::EncodeBuffer buf(2 * blocks.size() + 2 * srans::kLanes);
    uint8_t* p = buf.cursor();
    std::array<uint32_t, srans::kLanes> x;
    x.fill(srans::kLow);
    for (size_t b = scales.size(); b-- > 0;) {
        const srans::EncodeSymbol* t = sy + group[scales[b]] * kAlphabet;
        const uint8_t* v = blocks.data() + b * bb;
        for (unsigned k = bb; k; k -= 2) {
            srans::put(x[3], p, t[v[k - 1] >> 4]);
            srans::put(x[2], p, t[v[k - 1] & 15]);
            srans::put(x[1], p, t[v[k - 2] >> 4]);
            srans::put(x[0], p, t[v[k - 2] & 15]);
        }
    }
    buf.cursor() = p;
    buf.finish(x, out, states);
    return out;
}

namespace {

void decode_payload(std::span<const uint8_t> payload, std::span<uint8_t> out, std::span<const uint8_t> scales) {
    if (payload.size() < kHeaderBytes) throw CorruptData("fp4-tables: payload shorter than its header");
    if (payload[0] & ~(1u | kWideFlag | kSplitFlag | kPackedStatesFlag))
        throw CorruptData("fp4-tables: unknown flags " + std::to_string(payload[0]));
    const Kind kind = static_cast<Kind>(payload[0] & 1);
    const bool wide = payload[0] & kWideFlag, split = payload[0] & kSplitFlag;
    const srans::States states = payload[0] & kPackedStatesFlag ? srans::States::packed : srans::States::words;
    if (split && !wide) throw CorruptData("fp4-tables: the split layout without the wide one");
    const Grouping grouping{payload[1], payload[2]};
    const unsigned prec = payload[3];
    if (grouping.groups < 1 || grouping.groups > kMaxGroups) throw CorruptData("fp4-tables: bad group count");
    if (prec < kMinPrec || prec > kMaxPrec) throw CorruptData("fp4-tables: bad table precision");
    const unsigned bb = block_bytes(kind);
    if (out.size() != scales.size() * bb)
        throw CorruptData("fp4-tables: " + std::to_string(scales.size()) + " scales for " + std::to_string(out.size()) +
                          " bytes of " + std::to_string(bb) + "-byte blocks");

    srans::BitReader r(payload.subspan(kHeaderBytes));
    // Per-thread slot tables: a chunk's tables are rebuilt for every chunk.
    thread_local Slots t_slots;
    t_slots.resize((size_t{kMaxGroups} << kMaxPrec) + kSlotSlack);
    std::array<srans::Table, kMaxGroups> tables;
    std::array<LaneTable, kMaxGroups> lanes;
    bool by_lanes = false;
    unsigned starts = 0;
#ifdef PTWM_FP4_WIDE_AVX512
    by_lanes = wide && has_avx512() && g_lane_tables_allowed.load(std::memory_order_relaxed);
#endif
    std::array<bool, kMaxGroups> used{};
    for (unsigned g = 0; g < grouping.groups; ++g) {
        tables[g] = srans::read_table(r, kAlphabet, prec);
        used[g] = tables[g].used;
        if (by_lanes && used[g]) starts = std::max(starts, lane_table(tables[g], prec, lanes[g]));
    }
    by_lanes = by_lanes && starts <= kMaxBucketStarts;
    if (!by_lanes)
        for (unsigned g = 0; g < grouping.groups; ++g)
            if (used[g]) fill_group_slots(tables[g], t_slots.data() + (size_t{g} << prec));
    const auto group = group_table(kind, grouping);
    // Every block's group must have a table. Groups are 0 .. groups - 1
    // whatever the scale, so where all of them have one (nearly every
    // chunk) no block can lack it: the check a block (two dependent loads
    // each, some 2.5% of a large MXFP4 chunk's decode) is for the others.
    if (!std::all_of(used.begin(), used.begin() + grouping.groups, [](bool u) { return u; }))
        for (size_t b = 0; b < scales.size(); ++b)
            if (!used[group[scales[b]]]) throw CorruptData("fp4-tables: block " + std::to_string(b) + " has no table");
    const uint32_t* const slots = t_slots.data();
    const auto stream = payload.subspan(kHeaderBytes + r.bytes_used());
    if (wide) {
        decode_wide(stream, states, scales, out, split, WideTables{group, slots, by_lanes ? lanes.data() : nullptr, starts, prec, kind});
        return;
    }
    srans::DecodeState<> d(stream, states);
    switch (prec) {
        case 10: decode_blocks<10>(scales, group, slots, bb, d, out.data()); break;
        case 11: decode_blocks<11>(scales, group, slots, bb, d, out.data()); break;
        default: decode_blocks<12>(scales, group, slots, bb, d, out.data()); break;
    }
    d.finish();
}

}  // namespace

void decode(std::span<const uint8_t> payload, std::span<uint8_t> out, std::span<const uint8_t> scales) {
    try {
        decode_payload(payload, out, scales);
    } catch (const CorruptData& e) {
        // The table reader and the stream's own checks are static_rans.hpp's.
        const std::string what = e.what();
        if (what.rfind("fp4-tables", 0) == 0) throw;
        throw CorruptData("fp4-tables: " + what);
    }
}

void allow_simd(bool allowed) { g_simd.allow_simd(allowed); }
void allow_avx512(bool allowed) { g_simd.allow_avx512(allowed); }

void force_gather_lanes([[maybe_unused]] unsigned lanes) {
#ifdef PTWM_FP4_WIDE_AVX512
    srans::avx2::g_gather_lanes.store(lanes, std::memory_order_relaxed);
#endif
}

void allow_lane_tables(bool allowed) { g_lane_tables_allowed.store(allowed, std::memory_order_relaxed); }

void write_packed_states(bool packed) { g_packed_states.store(packed, std::memory_order_relaxed); }

void split_from(size_t bytes, unsigned streams) {
    g_split_min.store(bytes ? bytes : kSplitMinBytes, std::memory_order_relaxed);
    g_split_streams.store(bytes ? std::clamp(streams, 2u, kMaxStreams) : 2, std::memory_order_relaxed);
}

}  // namespace ptwm::fp4tables
