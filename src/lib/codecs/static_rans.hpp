// A static rANS coder for streams that switch between several small
// frequency tables symbol by symbol (order 0 under a context), with the
// tables carried in the payload in a compact form.
//
// Why not htscodecs' order-0 coder: it keeps one table per stream and
// spends one or two bytes a symbol describing it. On FP8 weights, where a
// tensor is a few tens of KiB and uses some 200 byte values, that table was
// 53 of the 66 KB by which esrgan F8's rANS output exceeded the order-0
// entropy of its bytes. Here a table costs a few bits a symbol:
//
// * Frequencies are sent as log-scale codes: 0 for an absent symbol, else
//   c >= 1 standing for about 2^((c-1)/4) (quarter-octave steps: a relative
//   error of at most 9%, which costs under 0.005 bits a coded symbol).
//   Codes of neighbouring symbols are close, so code[lo] is sent in
//   Exp-Golomb (k = 3) and each next one as a zigzag delta (k = 1).
// * Both sides turn codes into frequencies summing to 2^prec with the same
//   integer arithmetic (normalize()), so the decoder needs no floating point
//   and every platform decodes alike.
//
// The coder: 4 interleaved 32-bit states (element i on state i mod 4, so a
// decoder has independent work in flight), renormalised 16 bits at a time
// into [2^15, 2^31) as htscodecs' 4x16 coder does: a symbol moves at most one
// 16-bit word, so both directions can do it without a branch (a byte-wise
// coder moves 0, 1 or 2 bytes, and mispredicted that at every other symbol).
// Streams are written back to front and read front to back; the four final
// states come first, then the words, all little-endian. The final states
// take four bytes each (htscodecs' layout), or are packed (States::packed,
// see put_packed_states) where a codec's payload says so.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "ptwm/base/error.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ptwm::srans {

inline constexpr unsigned kMinPrec = 10, kMaxPrec = 15;
inline constexpr unsigned kLanes = 4;
inline constexpr uint32_t kLow = 1u << 15;  // states live in [kLow, kLow << 16)
// Codes 1..kMaxCode: a frequency of at most 2^kMaxPrec.
inline constexpr unsigned kMaxCode = 4 * kMaxPrec + 1;

// ---------------------------------------------------------------------------
// Bits, least significant first.

class BitWriter {
public:
    explicit BitWriter(std::vector<uint8_t>& out) : out_(out) {}
    void put(uint32_t v, unsigned bits) {
        acc_ |= uint64_t{v} << n_;
        n_ += bits;
        written_ += bits;
        while (n_ >= 8) {
            out_.push_back(static_cast<uint8_t>(acc_));
            acc_ >>= 8;
            n_ -= 8;
        }
    }
    // Exp-Golomb of order k, as: q ones and a zero (q = width of v + 2^k
    // minus k + 1), then the low q + k bits of v + 2^k.
    void exp_golomb(uint32_t v, unsigned k) {
        const uint64_t w = uint64_t{v} + (1u << k);
        const unsigned nb = static_cast<unsigned>(std::bit_width(w)) - 1;
        put((1u << (nb - k)) - 1, nb - k + 1);
        put(static_cast<uint32_t>(w & ((uint64_t{1} << nb) - 1)), nb);
    }
    // How many bits exp_golomb(v, k) writes.
    static size_t exp_golomb_bits(uint32_t v, unsigned k) {
        const unsigned nb = static_cast<unsigned>(std::bit_width(uint64_t{v} + (1u << k))) - 1;
        return size_t{2 * nb - k + 1};
    }
    size_t bit_count() const { return written_; }
    void flush() {
        if (n_) out_.push_back(static_cast<uint8_t>(acc_));
        acc_ = 0;
        n_ = 0;
    }

private:
    std::vector<uint8_t>& out_;
    uint64_t acc_ = 0;
    unsigned n_ = 0;
    size_t written_ = 0;
};

class BitReader {
public:
    explicit BitReader(std::span<const uint8_t> in) : in_(in) {}
    // bits <= 32. Eight bytes at once where the payload has them (decoders
    // read a chunk's tables before every chunk: on posenet's FP8 file,
    // reading them bit by bit was 5% of the decode time).
    uint32_t get(unsigned bits) {
        if (bits == 0) return 0;
        if (at_ + bits > in_.size() * 8) throw CorruptData("static rANS: tables run past the payload");
        const uint32_t v = static_cast<uint32_t>(peek() & ((uint64_t{1} << bits) - 1));
        at_ += bits;
        return v;
    }
    // Exp-Golomb of order k (k <= 3): q ones, a zero, then q + k bits.
    uint32_t exp_golomb(unsigned k) {
        uint32_t v = 0;
        exp_golomb_each(k, 1, [&](uint32_t x) { v = x; });
        return v;
    }
    // `count` Exp-Golomb codes of order k (k <= 3), each handed to f as
    // read, from a 64-bit window (a code takes 2 q + 1 + k <= 52 of its 57
    // bits) reloaded only when a code may not fit what is left of it. (A
    // table's codes, up to 127, a load each, each load's address waiting on
    // the code before: read_table's share of the posenet E5M2 decode
    // profile fell from 3.8% to 2.2%.)
    template <class F>
    void exp_golomb_each(unsigned k, size_t count, F&& f) {
        uint64_t w = peek();
        unsigned avail = 57;  // bits of w that are the payload's (or zeros past its end)
        for (size_t i = 0; i < count; ++i) {
            auto q = static_cast<unsigned>(std::countr_one(w));
            if (q >= avail || 2 * q + 1 + k > avail) {
                w = peek();
                avail = 57;
                q = static_cast<unsigned>(std::countr_one(w));
            }
            if (q > 24) throw CorruptData("static rANS: bad table code");
            const unsigned nb = q + k, used = q + 1 + nb;
            if (at_ + used > in_.size() * 8) throw CorruptData("static rANS: tables run past the payload");
            const uint64_t bits = (w >> (q + 1)) & ((uint64_t{1} << nb) - 1);
            at_ += used;
            w >>= used;  // used <= 52
            avail -= used;
            f(static_cast<uint32_t>(((uint64_t{1} << nb) | bits) - (1u << k)));
        }
    }
    // `count` values of `bits` bits (1 to 8) into out, as `count` calls of
    // get would read them, from a 64-bit window reloaded every 56 bits or
    // so: f8-tables' class of each column (up to thousands a chunk) took a
    // load and a bounds check each.
    void get_each(unsigned bits, size_t count, uint8_t* out) {
        if (at_ + count * bits > in_.size() * 8) throw CorruptData("static rANS: tables run past the payload");
        const uint32_t mask = (1u << bits) - 1;
        const size_t per_window = 56 / bits;
        for (size_t i = 0; i < count;) {
            uint64_t w = peek();
            const size_t end = std::min(count, i + per_window);
            at_ += (end - i) * bits;
            for (; i < end; ++i, w >>= bits) out[i] = static_cast<uint8_t>(w & mask);
        }
    }
    // Bytes consumed, the last one partly.
    size_t bytes_used() const { return (at_ + 7) / 8; }

private:
    // The next bits from at_ on: at least 57 where the payload has them,
    // zeros past its end (callers check the length they take).
    uint64_t peek() const {
        const size_t first = at_ >> 3;
        uint64_t w = 0;
        if (first + 8 <= in_.size()) {
            std::memcpy(&w, in_.data() + first, 8);
            w = le64(w);
        } else {
            for (size_t k = 0; first + k < in_.size(); ++k) w |= uint64_t{in_[first + k]} << (8 * k);
        }
        return w >> (at_ & 7);
    }
    static uint64_t le64(uint64_t w) {
        if constexpr (std::endian::native == std::endian::big) return __builtin_bswap64(w);
        return w;
    }
    std::span<const uint8_t> in_;
    size_t at_ = 0;
};

// ---------------------------------------------------------------------------
// Tables

struct Table {
    unsigned alphabet = 0;          // symbols 0..alphabet-1
    bool used = false;              // false: described as absent, never coded with
    std::vector<uint8_t> code;      // log-scale codes, per symbol
    std::vector<uint32_t> freq;     // normalised, summing to 2^prec when used
    std::vector<uint32_t> cum;
};

inline unsigned bits_for(unsigned alphabet) { return static_cast<unsigned>(std::bit_width(alphabet - 1)); }

// Codes -> frequencies summing to 2^prec: each present symbol gets
// max(1, round(a * 2^prec / sum a)) with a = 2^16 * 2^((code-1)/4) (from the
// integer table kQuarter); what that leaves over or under 2^prec is then
// dealt out one unit at a time to the present symbols in order of
// frequency, largest first (ties: smaller symbol first), round after round,
// never taking a symbol below 1. False when the codes make no table (only
// damaged input: no present symbol).
//
// `first` .. `last`: where the codes may be non-zero (all outside are 0),
// so that the loops over symbols skip the absent ends, which read_table
// knows: FP8 magnitude tables leave out the largest values, and often the
// smallest. (With the smaller arrays below, normalize's share of the
// posenet E5M2 decode profile fell from 5.3-5.9% to 3.7-4.7%.)
inline bool normalize(Table& t, unsigned prec, unsigned first, unsigned last) {
    static constexpr uint64_t kQuarter[4] = {65536, 77936, 92682, 110218};  // 2^16 * 2^(r/4), rounded
    auto weight = [](unsigned code) { return kQuarter[(code - 1) & 3] << ((code - 1) >> 2); };
    const uint32_t total = 1u << prec;
    const unsigned end = last + 1;
    // A frequency depends on the code only, so everything is counted per
    // code (a table has some 60 codes for up to 256 symbols): the decoder
    // normalises every table of every chunk, and this is a third of its
    // set-up.
    // (In two halves, even and odd symbols: neighbouring symbols share
    // codes -- absent ones all code 0 --, and one array's increments of the
    // same counter waited on each other, a fifth of this function's time.)
    // Arrays per code, kCodes of them, not per byte value: callers make or
    // accept codes up to kMaxCode only (table_for clamps, read_table
    // checks), and zeroing 256-entry arrays (rep stos, five a table) was a
    // fifth of this function's time. Any other code (damaged input) lands
    // in the last entry, outside the sums, so the count check below
    // rejects it as before.
    constexpr unsigned kCodes = kMaxCode + 2;
    const auto code_of = [&](unsigned s) { return std::min<unsigned>(t.code[s], kCodes - 1); };
    std::array<uint16_t, kCodes> count{}, odd{};
    unsigned s = first;
    for (; s + 1 < end; s += 2) ++count[code_of(s)], ++odd[code_of(s + 1)];
    if (s < end) ++count[code_of(s)];
    for (unsigned c = 0; c < kCodes; ++c) count[c] = static_cast<uint16_t>(count[c] + odd[c]);
    count[0] = static_cast<uint16_t>(count[0] + t.alphabet - (end - first));  // the absent ends
    uint64_t sum = 0;
    unsigned present = 0;
    for (unsigned c = 1; c <= kMaxCode; ++c) sum += count[c] * weight(c), present += count[c];
    if (sum == 0 || present > total || present != t.alphabet - count[0]) return false;
    std::array<uint32_t, kCodes> by_code{};
    int64_t diff = total;
    for (unsigned c = 1; c <= kMaxCode; ++c)
        if (count[c]) {
            by_code[c] = static_cast<uint32_t>(std::max<uint64_t>(1, (weight(c) * total + sum / 2) / sum));
            diff -= int64_t{count[c]} * by_code[c];
        }
    // Every symbol's frequency and start are written below, the absent
    // ends' too: no zeroing first (a decoder's tables are reused chunk
    // after chunk).
    t.freq.resize(t.alphabet);
    t.cum.resize(t.alphabet);
    std::fill_n(t.freq.data(), first, 0u);
    std::fill(t.freq.data() + end, t.freq.data() + t.alphabet, 0u);
    for (unsigned s = first; s < end; ++s) t.freq[s] = by_code[code_of(s)];
    if (diff != 0) {
        // The order, by counting: a frequency never falls as its code rises,
        // so codes from the top down, those of one frequency taken together
        // (rank), give frequency order; within a rank, symbols in order.
        std::array<uint16_t, kCodes + 1> rank_start{};  // then: each rank's next place
        std::array<uint8_t, kCodes> rank{};
        unsigned ranks = 0;
        for (unsigned c = kMaxCode, rank_freq = 0; c >= 1; --c) {
            if (!count[c]) continue;
            if (ranks == 0 || by_code[c] != rank_freq) ++ranks, rank_freq = by_code[c];
            rank[c] = static_cast<uint8_t>(ranks - 1);
            rank_start[ranks] = static_cast<uint16_t>(rank_start[ranks] + count[c]);
        }
        for (unsigned r = 1; r <= ranks; ++r) rank_start[r] = static_cast<uint16_t>(rank_start[r] + rank_start[r - 1]);
        std::array<uint8_t, 256> order;
        for (unsigned s = first; s < end; ++s)
            if (t.code[s]) order[rank_start[rank[code_of(s)]]++] = static_cast<uint8_t>(s);
        // Whole rounds of increments at once (each present symbol gains one
        // a round; none is ever skipped), then the part round one at a time.
        // Decrements skip symbols at 1, so they go one at a time.
        if (diff > 0) {
            const auto rounds = static_cast<uint32_t>(diff / present);
            if (rounds)
                for (unsigned k = 0; k < present; ++k) t.freq[order[k]] += rounds;
            diff -= int64_t{rounds} * present;
        }
        for (unsigned k = 0; diff != 0; k = k + 1 == present ? 0 : k + 1) {
            uint32_t& f = t.freq[order[k]];
            if (diff > 0) ++f, --diff;
            else if (f > 1) --f, ++diff;
        }
    }
    std::fill_n(t.cum.data(), first, 0u);
    uint32_t c = 0;
    for (unsigned s = first; s < end; ++s) t.cum[s] = c, c += t.freq[s];
    std::fill(t.cum.data() + end, t.cum.data() + t.alphabet, c);
    t.used = true;
    return true;
}

inline bool normalize(Table& t, unsigned prec) { return t.alphabet && normalize(t, prec, 0, t.alphabet - 1); }

// A table for symbol counts (encoder): each present symbol's code is its
// frequency's log in quarter octaves, rounded.
inline Table table_for(std::span<const uint64_t> counts, unsigned prec) {
    Table t;
    t.alphabet = static_cast<unsigned>(counts.size());
    t.code.assign(t.alphabet, 0);
    uint64_t n = 0;
    for (uint64_t c : counts) n += c;
    if (n == 0) return t;
    const double scale = std::ldexp(1.0, static_cast<int>(prec)) / static_cast<double>(n);
    // round(4 log2 x) from x's binary exponent and four compares of its
    // mantissa with the quarter octaves' midpoints 2^(1/8), 2^(3/8), ...:
    // std::log2 and std::lround were a third of the time of the encoders'
    // table searches (which build some 5-10 tables a chunk, 35 us a 3 KiB
    // FP8 chunk). The two differ only where x lies within a rounding of a
    // midpoint, which are irrational.
    static constexpr double kMid[4] = {1.0905077326652577, 1.2968395546510096, 1.5422108254079407, 1.8340080864093424};
    for (unsigned s = 0; s < t.alphabet; ++s) {
        if (!counts[s]) continue;
        int e;
        const double m = 2 * std::frexp(static_cast<double>(counts[s]) * scale, &e);  // x = m 2^(e - 1), m in [1, 2)
        const int c = 1 + 4 * (e - 1) + (m >= kMid[0]) + (m >= kMid[1]) + (m >= kMid[2]) + (m >= kMid[3]);
        t.code[s] = static_cast<uint8_t>(std::clamp<int>(c, 1, static_cast<int>(4 * prec + 1)));
    }
    if (!normalize(t, prec)) throw Error("static rANS: no table of " + std::to_string(prec) + " bits fits the counts");
    return t;
}

// The first and last present symbol of a used table.
inline std::pair<unsigned, unsigned> code_range(const Table& t) {
    unsigned lo = 0, hi = t.alphabet - 1;
    while (!t.code[lo]) ++lo;
    while (!t.code[hi]) --hi;
    return {lo, hi};
}

// Neighbouring codes' difference, zigzagged to a non-negative value.
inline uint32_t code_delta(const Table& t, unsigned s) {
    const int d = int{t.code[s]} - int{t.code[s - 1]};
    return d >= 0 ? 2u * static_cast<unsigned>(d) : 2u * static_cast<unsigned>(-d) - 1;
}

inline void write_table(BitWriter& w, const Table& t) {
    w.put(t.used, 1);
    if (!t.used) return;
    const auto [lo, hi] = code_range(t);
    const unsigned b = bits_for(t.alphabet);
    w.put(lo, b);
    w.put(hi - lo, b);
    w.exp_golomb(t.code[lo] - 1u, 3);
    for (unsigned s = lo + 1; s <= hi; ++s) w.exp_golomb(code_delta(t, s), 1);
}

// Into `t`, whose vectors' memory is reused: a decoder reads a chunk's
// tables (up to 9) before every chunk, three allocations each before.
inline void read_table(BitReader& r, unsigned alphabet, unsigned prec, Table& t) {
    t.alphabet = alphabet;
    t.used = false;
    t.code.assign(alphabet, 0);
    t.freq.clear();
    t.cum.clear();
    if (!r.get(1)) return;
    const unsigned b = bits_for(alphabet);
    const unsigned lo = r.get(b), span = r.get(b);
    if (lo + span >= alphabet) throw CorruptData("static rANS: table symbols out of range");
    int c = static_cast<int>(r.exp_golomb(3)) + 1;
    const auto put = [&](unsigned s) {
        if (c < 0 || c > static_cast<int>(kMaxCode)) throw CorruptData("static rANS: bad table code");
        t.code[s] = static_cast<uint8_t>(c);
    };
    put(lo);
    unsigned s = lo;
    r.exp_golomb_each(1, span, [&](uint32_t z) {
        c += (z & 1) ? -static_cast<int>((z + 1) / 2) : static_cast<int>(z / 2);
        put(++s);
    });
    if (!t.code[lo] || !t.code[lo + span] || !normalize(t, prec, lo, lo + span)) throw CorruptData("static rANS: bad table");
}

inline Table read_table(BitReader& r, unsigned alphabet, unsigned prec) {
    Table t;
    read_table(r, alphabet, prec, t);
    return t;
}

// k log2 k, from a table below 4096 (the same doubles as computing them,
// so every estimate built on it chooses as before). The encoders' entropy
// estimates take thousands a chunk (f8-tables' class-count estimate some
// 2000), and std::log2 was a tenth of f8-tables' encoder time on chunks of
// a few KiB.
inline double k_log2_k(uint64_t k) {
    constexpr size_t kTable = 4096;
    static const std::array<double, kTable> table = [] {
        std::array<double, kTable> t{};
        for (size_t i = 1; i < kTable; ++i) t[i] = static_cast<double>(i) * std::log2(static_cast<double>(i));
        return t;
    }();
    return k < kTable ? table[k] : static_cast<double>(k) * std::log2(static_cast<double>(k));
}

// log2 of a frequency (1 .. 2^kMaxPrec), as a float, computed the first
// time it is asked for: encoders weigh many tables, but of the 2^15
// frequencies a process sees some hundreds. (Computing them all at once,
// 2^15 calls of std::log2 and 128 KiB to page in, took 0.3 ms, some 4% of
// packing posenet MXFP4, a 0.7 MB file.) An entry holds the float's bits
// with bit 31 set once known (the values are never negative); threads that
// race on an entry store the same bits.
inline float log2_of_frequency(uint32_t f) {
    static std::array<std::atomic<uint32_t>, (1u << kMaxPrec) + 1> known{};
    constexpr uint32_t kKnown = 1u << 31;
    uint32_t w = known[f].load(std::memory_order_relaxed);
    if (!(w & kKnown)) [[unlikely]] {
        w = std::bit_cast<uint32_t>(static_cast<float>(std::log2(static_cast<double>(f)))) | kKnown;
        known[f].store(w, std::memory_order_relaxed);
    }
    return std::bit_cast<float>(w & ~kKnown);
}

// What coding `counts` with `t` costs in bits (the stream, not the table).
inline double cost_bits(std::span<const uint64_t> counts, const Table& t, unsigned prec) {
    double bits = 0;
    for (size_t s = 0; s < counts.size(); ++s)
        if (counts[s]) bits += static_cast<double>(counts[s]) * (prec - log2_of_frequency(t.freq[s]));
    return bits;
}

// The table's description in bits (what write_table writes, counted).
inline size_t table_bits(const Table& t) {
    if (!t.used) return 1;
    const auto [lo, hi] = code_range(t);
    size_t bits = 1 + 2 * bits_for(t.alphabet) + BitWriter::exp_golomb_bits(t.code[lo] - 1u, 3);
    for (unsigned s = lo + 1; s <= hi; ++s) bits += BitWriter::exp_golomb_bits(code_delta(t, s), 1);
    return bits;
}

// ---------------------------------------------------------------------------
// The coder

// A symbol as the encoder codes it: the division by its frequency turned
// into a multiply and shift (ryg_rans' RansEncSymbol; exact for states
// below 2^31, which renormalisation keeps them).
struct EncodeSymbol {
    uint32_t x_max = 0;     // renormalise while the state is at least this
    uint32_t rcp_freq = 0;  // 2^(31 + shift) / freq, rounded up
    uint32_t bias = 0;
    uint16_t cmpl_freq = 0;  // 2^prec - freq
    uint16_t rcp_shift = 0;
};
static_assert(sizeof(EncodeSymbol) == 16, "one aligned load a symbol");

inline std::vector<EncodeSymbol> encode_symbols(const Table& t, unsigned prec) {
    std::vector<EncodeSymbol> out(t.alphabet);
    if (!t.used) return out;
    for (unsigned s = 0; s < t.alphabet; ++s) {
        const uint32_t f = t.freq[s];
        if (!f) continue;
        EncodeSymbol& e = out[s];
        e.x_max = ((kLow >> prec) << 16) * f;
        e.cmpl_freq = static_cast<uint16_t>((1u << prec) - f);
        if (f < 2) {
            e.rcp_freq = ~0u;
            e.rcp_shift = 0;
            e.bias = t.cum[s] + (1u << prec) - 1;
        } else {
            unsigned shift = 0;
            while (f > (1u << shift)) ++shift;
            e.rcp_freq = static_cast<uint32_t>(((uint64_t{1} << (shift + 31)) + f - 1) / f);
            e.rcp_shift = static_cast<uint16_t>(shift - 1);
            e.bias = t.cum[s];
        }
    }
    return out;
}

// How a stream's final states are written, at its start.
//   words:  four bytes each, lane 0 first (htscodecs' layout; f8-tables and
//           fp4-tables streams of stores written before packed states).
//   packed: a state in [kLow, kLow << 16) has 16 to 31 significant bits.
//           First each state's bit count less 16, a nibble a lane (lane 0
//           in the low nibble of the first byte), then each state's bits
//           below its leading one, lane 0 first, least significant first,
//           the last byte padded with zeros (which readers do not check, as
//           for the tables).
// A coder's final states are spread about as 1/x over their range, so a
// four-byte state holds some 9 bits that say nothing; packed, a state costs
// its own bits plus about 3.5, the least any code of such states can (the
// 1/x spread's entropy is log2 x + log2(16 ln 2) bits): 0.7 bytes a state
// less, 22 bytes for 32 states, 44 for 64. The nibbles come first so that a
// decoder finds every state's bits with a prefix sum, not a chain of reads.
enum class States : uint8_t { words, packed };

template <size_t Lanes>
void put_packed_states(const std::array<uint32_t, Lanes>& x, std::vector<uint8_t>& out) {
    static_assert(Lanes % 2 == 0);
    for (uint32_t s : x)
        if (s < kLow || s >= kLow << 16) throw Error("static rANS: a final state out of range");
    for (size_t lane = 0; lane < Lanes; lane += 2) {
        const auto len = [&](size_t k) { return static_cast<unsigned>(std::bit_width(x[k])) - 16; };
        out.push_back(static_cast<uint8_t>(len(lane) | len(lane + 1) << 4));
    }
    BitWriter w(out);
    for (uint32_t s : x) {
        const auto below = static_cast<unsigned>(std::bit_width(s)) - 1;
        w.put(s & ((1u << below) - 1), below);
    }
    w.flush();
}

// Reads put_packed_states' states into x; returns the bytes they take.
template <size_t Lanes>
size_t get_packed_states(std::span<const uint8_t> in, std::array<uint32_t, Lanes>& x) {
    static_assert(Lanes % 2 == 0);
    if (in.size() < Lanes / 2) throw CorruptData("static rANS: stream shorter than its states");
    std::array<unsigned, Lanes> below, at;
    size_t bits = 0;
    for (size_t lane = 0; lane < Lanes; ++lane) {
        below[lane] = 15 + ((in[lane / 2] >> (4 * (lane & 1))) & 15u);
        at[lane] = static_cast<unsigned>(bits);
        bits += below[lane];
    }
    const std::span<const uint8_t> body = in.subspan(Lanes / 2);
    const size_t bytes = (bits + 7) / 8;
    if (body.size() < bytes) throw CorruptData("static rANS: stream shorter than its states");
    for (size_t lane = 0; lane < Lanes; ++lane) {
        const size_t first = at[lane] / 8;
        uint64_t w = 0;
        if (first + 8 <= body.size()) {
            std::memcpy(&w, body.data() + first, 8);
            if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
        } else {
            for (size_t k = 0; first + k < body.size(); ++k) w |= uint64_t{body[first + k]} << (8 * k);
        }
        const unsigned b = below[lane];
        x[lane] = 1u << b | static_cast<uint32_t>((w >> (at[lane] % 8)) & ((1u << b) - 1));
    }
    return Lanes / 2 + bytes;
}

// A stream's final states, appended to `out`: packed, or four
// little-endian bytes a state, lane 0 first.
template <size_t Lanes>
void put_states(const std::array<uint32_t, Lanes>& x, std::vector<uint8_t>& out, States states) {
    if (states == States::packed) return put_packed_states(x, out);
    for (uint32_t s : x)
        for (unsigned b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(s >> (8 * b)));
}

// The encoder's output: written back to front into a buffer sized for the
// worst case (a word a symbol), so the hot loop has no capacity checks.
// Callers keep the states in locals.
class EncodeBuffer {
public:
    // Slack below the last word: two bytes for put(), which stores its word
    // before it knows whether the word is kept, and 4 bytes a lane (once
    // room for the final states, which finish() now appends to `out`), where
    // the SIMD encoders' 16-byte stores below the cursor land. The memory is
    // per thread and reused, and not cleared: a fresh buffer per chunk cost
    // page faults and a memset.
    explicit EncodeBuffer(size_t max_symbols, size_t lanes = kLanes) {
        const size_t need = 2 * max_symbols + 4 * lanes + 2;
        thread_local std::unique_ptr<uint8_t[]> t_buf;
        thread_local size_t t_size = 0;
        if (t_size < need) t_buf.reset(new uint8_t[need]), t_size = need;
        end_ = t_buf.get() + t_size;
        p_ = end_;
    }
    uint8_t*& cursor() { return p_; }
    // Appends the stream -- the final states (lane 0 first), then the
    // words -- to `out`.
    template <size_t Lanes>
    void finish(const std::array<uint32_t, Lanes>& x, std::vector<uint8_t>& out, States states = States::words) {
        put_states(x, out, states);
        out.insert(out.end(), p_, end_);
    }

private:
    uint8_t* end_;
    uint8_t* p_;
};

// Codes one symbol onto state x (symbols go in reverse of decode order).
[[gnu::always_inline]] inline void put(uint32_t& x, uint8_t*& p, const EncodeSymbol& e) {
    const uint32_t out = x >= e.x_max;  // one word at most: x < 2^31, x_max >= 2^16
    const uint16_t w = static_cast<uint16_t>(x);
    std::memcpy(p - 2, &w, 2);
    // Arithmetic, not `out ? 16 : 0`: GCC made that a branch, which the
    // coin-flip of renormalisation mispredicts half the time.
    p -= out << 1;
    x >>= out << 4;
    const uint32_t q = static_cast<uint32_t>((uint64_t{x} * e.rcp_freq) >> 32) >> e.rcp_shift;
    x = x + e.bias + q * uint32_t{e.cmpl_freq};
}

// put with the words stored through a uint16_t cursor, for coders whose
// states live in memory (fp4-tables' 32): a byte store may alias any state,
// where a uint16_t store cannot alias a uint32_t. EncodeBuffer's end is
// even, and so is every word's address.
[[gnu::always_inline]] inline void put_word(uint32_t& x, uint16_t*& q, const EncodeSymbol& e) {
    const uint32_t out = x >= e.x_max;  // one word at most, as in put
    q[-1] = static_cast<uint16_t>(x);
    q -= out;
    x >>= out << 4;
    const uint32_t quot = static_cast<uint32_t>((uint64_t{x} * e.rcp_freq) >> 32) >> e.rcp_shift;
    x = x + e.bias + quot * uint32_t{e.cmpl_freq};
}

// A table as the decoder uses it: the symbol of every slot.
struct DecodeTable {
    std::vector<uint8_t> symbol;  // 2^prec entries; empty when the table is unused
    std::vector<uint32_t> freq, cum;
};

inline DecodeTable decode_table(const Table& t, unsigned prec) {
    DecodeTable d;
    if (!t.used) return d;
    d.symbol.resize(size_t{1} << prec);
    for (unsigned s = 0; s < t.alphabet; ++s)
        std::fill_n(d.symbol.begin() + t.cum[s], t.freq[s], static_cast<uint8_t>(s));
    d.freq = t.freq;
    d.cum = t.cum;
    return d;
}

// The stream being read: the Lanes states, then bytes from `p` to `end`.
template <size_t Lanes = kLanes>
struct DecodeState {
    std::array<uint32_t, Lanes> x{};
    const uint8_t* p = nullptr;
    const uint8_t* end = nullptr;

    explicit DecodeState(std::span<const uint8_t> in, States states = States::words)
        : p(in.data()), end(in.data() + in.size()) {
        if (states == States::packed) {
            p += get_packed_states(in, x);  // every state in range by construction
            return;
        }
        if (in.size() < 4 * Lanes) throw CorruptData("static rANS: stream shorter than its states");
        for (auto& s : x) {
            s = uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
            p += 4;
            if (s < kLow || s >= kLow << 16) throw CorruptData("static rANS: bad initial state");
        }
    }
    // A stream decoded in full ends with every state back at its start and
    // no byte left over.
    void finish() const {
        if (p != end) throw CorruptData("static rANS: bytes left after the stream");
        for (uint32_t s : x)
            if (s != kLow) throw CorruptData("static rANS: stream does not end where it started");
    }
};

// Decodes one symbol from state x. The table must be used (callers check:
// an unused table has no slots).
[[gnu::always_inline]] inline unsigned get(uint32_t& x, const uint8_t*& p, const uint8_t* end, const DecodeTable& t, unsigned prec) {
    const uint32_t slot = x & ((1u << prec) - 1);
    const unsigned s = t.symbol[slot];
    x = t.freq[s] * (x >> prec) + slot - t.cum[s];
    if (x < kLow) {
        if (end - p < 2) throw CorruptData("static rANS: stream runs past the payload");
        x = x << 16 | uint32_t{p[0]} | uint32_t{p[1]} << 8;
        p += 2;
    }
    return s;
}

// The same without the bounds check, and without a branch: for callers that
// know at least two bytes remain.
[[gnu::always_inline]] inline unsigned get_unchecked(uint32_t& x, const uint8_t*& p, const DecodeTable& t, unsigned prec) {
    const uint32_t slot = x & ((1u << prec) - 1);
    const unsigned s = t.symbol[slot];
    x = t.freq[s] * (x >> prec) + slot - t.cum[s];
    const uint32_t in = x < kLow;
    uint16_t w;
    std::memcpy(&w, p, 2);
    x = x << (in << 4) | (w & (0u - in));  // arithmetic: a branch here mispredicts
    p += in << 1;
    return s;
}

#if defined(__x86_64__)
// The AVX-512 decoders' renormalisation of 16 states, in lane order: the
// states below 2^15 take the next words, one each, expanded into their
// lanes. The two loads below differ only in how they read the words.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __mmask16 below_low_avx512(__m512i x) {
    return _mm512_cmplt_epu32_mask(x, _mm512_set1_epi32(static_cast<int>(kLow)));
}
// States m take the words (lane order: the first word to the lowest lane in m).
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512i take_words_avx512(__m512i x, __mmask16 m,
                                                                                                  __m256i words) {
    const __m512i w = _mm512_maskz_expand_epi32(m, _mm512_cvtepu16_epi32(words));
    return _mm512_mask_or_epi32(x, m, _mm512_slli_epi32(x, 16), w);
}

// The caller knows 32 bytes remain at p.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512i renormalize16_avx512(__m512i x,
                                                                                                   const uint8_t*& p) {
    const __mmask16 m = below_low_avx512(x);
    const __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    p += 2 * __builtin_popcount(m);
    return take_words_avx512(x, m, words);
}

// Where fewer than 32 bytes of the payload may be left: the load takes
// only the words the states take (a masked load reads nothing past them),
// and a stream that asks for more than is left is refused. Slower (the
// load waits for the count), so only for a chunk's last rounds, which
// otherwise went to the scalar loop.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512i renormalize16_avx512_near_end(
    __m512i x, const uint8_t*& p, const uint8_t* end) {
    const __mmask16 m = below_low_avx512(x);
    const auto k = static_cast<unsigned>(__builtin_popcount(m));
    if (static_cast<std::ptrdiff_t>(2 * k) > end - p) throw CorruptData("static rANS: stream runs past the payload");
    const __m256i words = _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << k) - 1), p);
    p += 2 * k;
    return take_words_avx512(x, m, words);
}
#endif

}  // namespace ptwm::srans
