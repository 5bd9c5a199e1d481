#include "codecs/fp4_tables.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "codecs/static_rans.hpp"
#include "ptwm/base/error.hpp"

namespace ptwm::fp4tables {
namespace {

constexpr unsigned kAlphabet = 16;  // one FP4 value
constexpr unsigned kMaxGroups = 16;
// 16 symbols need no finer tables: at 10 bits the rounding costs some
// 0.001 bits a value. Up to 12 bits a slot's offset fits the fused decode
// entry below.
constexpr unsigned kMinPrec = srans::kMinPrec, kMaxPrec = 12;
static_assert(kMinPrec >= 10 && kMaxPrec <= 12);
constexpr size_t kHeaderBytes = 4;  // kind, base, groups, precision
// What a group's table costs while the grouping is searched (the real
// tables are weighed once it is chosen): 16 codes of a few bits.
constexpr double kTableBitsGuess = 64;

using Counts = std::array<uint64_t, kAlphabet>;

uint8_t context(Kind k, uint8_t scale) { return k == Kind::nv ? static_cast<uint8_t>((scale >> 3) & 0x0F) : scale; }

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
        if (k) n += k, sum += static_cast<double>(k) * std::log2(static_cast<double>(k));
    return n ? static_cast<double>(n) * std::log2(static_cast<double>(n)) - sum : 0;
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

// A decode table: one word a slot, the symbol, the slot's offset in it
// and its frequency: x = freq * (x >> prec) + offset in one load.
using Slots = std::vector<uint32_t>;

void fill_slots(const srans::Table& t, uint32_t* slots) {
    for (unsigned s = 0; s < kAlphabet; ++s)
        for (uint32_t k = 0; k < t.freq[s]; ++k) slots[t.cum[s] + k] = t.freq[s] << 16 | k << 4 | s;
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
void decode_blocks(std::span<const uint8_t> scales, const std::array<uint8_t, 256>& group,
                   const std::array<bool, kMaxGroups>& used, const uint32_t* slots, unsigned bb,
                   srans::DecodeState<>& d, uint8_t* o) {
    // Locals, not d's members: the byte stores below may alias anything
    // reachable through a pointer, and would force them back to memory.
    const uint8_t* p = d.p;
    const uint8_t* const end = d.end;
    uint32_t x0 = d.x[0], x1 = d.x[1], x2 = d.x[2], x3 = d.x[3];
    for (size_t b = 0; b < scales.size(); ++b, o += bb) {
        const unsigned g = group[scales[b]];
        if (!used[g]) throw CorruptData("fp4-tables: block " + std::to_string(b) + " has no table");
        const uint32_t* t = slots + (size_t{g} << Prec);
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

}  // namespace

unsigned block_bytes(Kind k) { return k == Kind::nv ? 8 : 16; }

std::vector<uint8_t> encode(std::span<const uint8_t> blocks, std::span<const uint8_t> scales, Kind kind) {
    const unsigned bb = block_bytes(kind);
    if (blocks.size() != scales.size() * bb) throw Error("fp4-tables: the blocks and their scales disagree in number");

    std::array<Counts, 256> per_ctx{};
    unsigned lo = 255, hi = 0;
    for (size_t b = 0; b < scales.size(); ++b) {
        const uint8_t c = context(kind, scales[b]);
        lo = std::min<unsigned>(lo, c), hi = std::max<unsigned>(hi, c);
        Counts& h = per_ctx[c];
        for (const uint8_t* p = blocks.data() + b * bb; p != blocks.data() + (b + 1) * bb; ++p) ++h[*p & 15], ++h[*p >> 4];
    }
    if (scales.empty()) lo = hi = 0;
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

    std::vector<uint8_t> out = {static_cast<uint8_t>(kind), grouping.base, grouping.groups, static_cast<uint8_t>(prec)};
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

    // Back to front. A block's value i (low nibble of byte i / 2 first)
    // is on state i mod 4; blocks hold a multiple of four values.
    srans::EncodeBuffer buf(2 * blocks.size() + 2 * srans::kLanes);
    uint8_t* p = buf.cursor();
    std::array<uint32_t, srans::kLanes> x;
    x.fill(srans::kLow);
    const srans::EncodeSymbol* const sy = sym.data();
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
    buf.finish(x, out);
    return out;
}

namespace {

void decode_payload(std::span<const uint8_t> payload, std::span<uint8_t> out, std::span<const uint8_t> scales) {
    if (payload.size() < kHeaderBytes) throw CorruptData("fp4-tables: payload shorter than its header");
    if (payload[0] > 1) throw CorruptData("fp4-tables: unknown block kind " + std::to_string(payload[0]));
    const Kind kind = static_cast<Kind>(payload[0]);
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
    t_slots.resize(size_t{kMaxGroups} << kMaxPrec);
    std::array<bool, kMaxGroups> used{};
    for (unsigned g = 0; g < grouping.groups; ++g) {
        const srans::Table t = srans::read_table(r, kAlphabet, prec);
        used[g] = t.used;
        if (t.used) fill_slots(t, t_slots.data() + (size_t{g} << prec));
    }
    srans::DecodeState<> d(payload.subspan(kHeaderBytes + r.bytes_used()));
    const auto group = group_table(kind, grouping);
    const uint32_t* const slots = t_slots.data();
    switch (prec) {
        case 10: decode_blocks<10>(scales, group, used, slots, bb, d, out.data()); break;
        case 11: decode_blocks<11>(scales, group, used, slots, bb, d, out.data()); break;
        default: decode_blocks<12>(scales, group, used, slots, bb, d, out.data()); break;
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

}  // namespace ptwm::fp4tables
