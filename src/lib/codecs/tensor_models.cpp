#include "codecs/tensor_models.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "base/scratch.hpp"
#include "base/varint.hpp"
#include "ptwm/base/error.hpp"

#include "codecs/context_coder.hpp"

namespace ptwm::models {
namespace {

using context::Decoder;
using context::Encoder;
using context::Node;
using context::RateTable;

// Per-position tables are sized by the layout; past this many entries a
// context is dropped instead (it would cost more memory than it saves).
constexpr uint64_t kMaxTable = 1u << 20;

// ---------------------------------------------------------------------------
// Block scales (E8M0, one byte per 32-value block).
//
// A scale tensor holds only a few distinct values; what predicts a block's
// scale is its input channel's magnitude, seen in the same channel's blocks
// at earlier kernel positions. So: the chunk's minimum scale is sent raw
// (8 bits), then each u = s - min in unary ("u > k?", k = 0..3, one adaptive
// node per context and k; Exp-Golomb beyond), under one context: the mean u
// of this input channel's earlier blocks in 1/3 steps (capped), or the
// previous scale where the layout has no kernel positions. 7 x 4 nodes: cheap
// enough to learn inside a 50-byte tensor. (A residual against the left
// neighbour does worse than order 0: neighbours are noisy, the channel level
// carries the information.)
//
// The channel period P is often not in the scale tensor's shape (a flat
// [blocks] vector, or blocks of a flattened kernel), so the encoder also
// tries the periods of common kernel sizes and keeps the smallest result;
// the payload starts with P and R as two varints.
struct ScaleGeometry {
    uint64_t blocks_per_row = 1;  // R: scales per row (out_channels / 32)
    uint64_t blocks_per_tap = 0;  // P: R * in_channels, scales per kernel position (0: none)
};

// A scale tensor shaped like its kernel, [kh, kw, in, out / 32]: the leading
// dims are kernel positions, the last two an in-channel's row of scales.
ScaleGeometry scale_geometry(std::span<const uint64_t> shape) {
    ScaleGeometry g;
    if (shape.size() < 3 || shape.back() == 0) return g;
    uint64_t taps = 1;
    for (size_t k = 0; k + 2 < shape.size(); ++k) taps *= shape[k];
    const uint64_t per_tap = shape[shape.size() - 2] * shape.back();
    if (taps > 1 && per_tap <= kMaxTable) g = {shape.back(), per_tap};
    return g;
}

// Kernel positions (kh * kw) whose periods the encoder tries besides the shape's.
constexpr uint64_t kScaleTaps[] = {3, 4, 9, 25, 49};

constexpr RateTable kScaleRates(60, 0.5);
constexpr double kScaleFloorShare = 0.85;  // see plan_scales
constexpr unsigned kScaleLevels = 6, kScaleSteps = 3;

// The level of a channel's mean u, sum / cnt (cnt > 0):
// min(levels - 1, round(steps * mean)), by comparisons: the rounded
// quotient (steps * sum + cnt / 2) / cnt is at least k exactly when the
// numerator is at least k * cnt. (A template: the estimate takes it a
// vector of 32-bit lanes at a time.)
template <class T>
[[gnu::always_inline]] inline T channel_level(T sum, T cnt) {
    const T num = kScaleSteps * sum + cnt / 2;
    T lev = 0;
    for (T k = 1; k < T{kScaleLevels}; ++k) lev += num >= k * cnt;
    return lev;
}
// The level under the previous scale's u, where the layout has no channels.
[[gnu::always_inline]] inline unsigned previous_level(uint8_t prev) {
    return std::min<unsigned>(kScaleLevels - 1, kScaleSteps * prev);
}

// The context each scale is coded under, shared by the coder and the
// encoder's estimate of it.
class ScaleContexts {
public:
    // For `n` scales from `first` on. The per-channel sums hold only the
    // channels those visit: a period (channel count) up to the tensor's size
    // made each call allocate and clear them all -- 16 MiB for a period of
    // 2^20, 7 ms to decode 16 scales. A chunk shorter than the period
    // visits at most n / R + 3 channels, in order from its first one
    // (wrapping once, possibly back into it), so a channel's slot is its
    // distance from the first channel modulo the channel count: the same
    // sums as before under other indices, and the same coding.
    ScaleContexts(uint64_t first, ScaleGeometry g, size_t n)
        : R_(g.blocks_per_row), P_(g.blocks_per_tap), channels_(P_ ? P_ / R_ + 1 : 1) {
        pos_ = P_ ? first % P_ : 0;
        const uint64_t ch = R_ ? pos_ / R_ : 0;
        sub_ = R_ ? pos_ % R_ : 0;
        const bool by_distance = P_ && n < P_;
        slot_ = by_distance ? 0 : ch;
        wrap_slot_ = by_distance ? (channels_ - ch) % channels_ : 0;  // the slot of channel 0
        chsum_.resize(by_distance ? std::min<uint64_t>(channels_, n / R_ + 4) : channels_);
        chcnt_.resize(chsum_.size());
    }
    // Context of scale i (0 .. kScaleLevels); `prev` is u of scale i - 1.
    unsigned level(size_t i, unsigned prev) const {
        if (P_ && chcnt_[slot_]) return static_cast<unsigned>(channel_level(chsum_[slot_], chcnt_[slot_]));
        if (!P_ && i) return previous_level(static_cast<uint8_t>(prev));
        return kScaleLevels;  // no history
    }
    // Scale i was u above the minimum.
    void update(unsigned u) {
        if (!P_) return;
        chsum_[slot_] += u;
        chcnt_[slot_]++;
        // The channel of scale `first + i` is ((first + i) % P) / R. Counters
        // that step with i give it without two 64-bit divisions a scale,
        // which were most of the model's time.
        if (++pos_ == P_) {
            pos_ = sub_ = 0;
            slot_ = wrap_slot_;
        } else if (++sub_ == R_) {
            sub_ = 0;
            if (++slot_ == channels_) slot_ = 0;
        }
    }

private:
    uint64_t R_, P_, channels_;
    // Per input channel visited: sum and count of u so far.
    // 64-bit: a chunk may hold 2^28 scales (kMaxChunkBytes).
    std::vector<uint64_t> chsum_, chcnt_;
    uint64_t pos_, sub_, slot_, wrap_slot_;
};

// The coder's minimum, 8 raw bits; returns it (what a decoder read).
template <class C>
unsigned code_scale_min(C& c, unsigned mn) {
    unsigned x = 0;
    for (int b = 7; b >= 0; --b) x = x << 1 | c.raw((mn >> b) & 1);
    return x;
}

// One scale's u under its context's four nodes; returns u.
template <class C>
[[gnu::always_inline]] inline unsigned code_scale_u(C& c, Node* nd, unsigned u) {
    unsigned k = 0;
    while (k < 4 && c.bit(nd[k], u > k)) ++k;
    if (k == 4) k = 3 + context::raw_exp_golomb(c, u - 3, 8);  // u - 3 >= 1
    return k;
}

void decode_scale_values(Decoder& c, uint8_t* s, size_t n, uint64_t first, ScaleGeometry g) {
    if (n == 0) return;
    const unsigned mn = code_scale_min(c, 0);
    Node nodes[(kScaleLevels + 1) * 4];
    ScaleContexts ctx(first, g, n);
    for (size_t i = 0; i < n; ++i) {
        Node* nd = &nodes[ctx.level(i, i ? static_cast<uint8_t>(s[i - 1] - mn) : 0) * 4];
        const unsigned u = code_scale_u(c, nd, 0);
        s[i] = static_cast<uint8_t>(mn + u);
        ctx.update(u);
    }
}

// The scale model's (context, symbol) pairs as one byte each: context *
// kScaleSymbols + min(u, 4), the unary symbol (u > 0 .. u > 3 decided).
constexpr unsigned kScaleSymbols = 5;
constexpr unsigned kScalePairs = (kScaleLevels + 1) * kScaleSymbols;

// Counts of `pairs` (values below kScalePairs) into `count`, in four tables
// that take every fourth byte: runs of one pair, the common case, would
// otherwise wait on each other's increments.
void count_scale_pairs(std::span<const uint8_t> pairs, std::array<uint32_t, kScalePairs>& count) {
    std::array<std::array<uint32_t, kScalePairs>, 4> part{};
    size_t k = 0;
    for (; k + 4 <= pairs.size(); k += 4)
        for (size_t t = 0; t < 4; ++t) ++part[t][pairs[k + t]];
    for (; k < pairs.size(); ++k) ++part[0][pairs[k]];
    for (unsigned v = 0; v < kScalePairs; ++v) count[v] += part[0][v] + part[1][v] + part[2][v] + part[3][v];
}

// What the scale model spends on a tensor whatever its contexts: its
// minimum (the u = s - min it codes) and the Exp-Golomb bits beyond the
// unary decisions (u >= 4), in raw bits.
struct ScaleSummary {
    unsigned min = 255;
    uint64_t escape_bits = 0;
};
ScaleSummary summarize_scales(const uint8_t* s, size_t n) {
    ScaleSummary r;
    for (size_t i = 0; i < n; ++i) r.min = std::min<unsigned>(r.min, s[i]);
    for (size_t i = 0; i < n; ++i)
        if (const unsigned u = s[i] - r.min; u >= 4) r.escape_bits += 2 * (std::bit_width(u - 3) - 1) + 1;  // rare
    return r;
}

// Every scale's (context, symbol) pair under `g` (m: the minimum), for the
// encoder and the estimate: where the context needs no state carried scale
// by scale (the previous scale; a kernel tap's period) a vector at a time.
void scale_pairs(const uint8_t* s, size_t n, uint64_t first, ScaleGeometry g, uint8_t m, std::vector<uint8_t>& pairs) {
    const auto symbol = [](uint8_t u) { return std::min<uint8_t>(u, 4); };  // the unary symbol
    pairs.resize(n);
    if (n == 0) return;
    uint8_t* __restrict out = pairs.data();  // (byte stores may alias anything: unrestricted, no vectors)
    const uint64_t P = g.blocks_per_tap;
    if (P == 0) {
        // The previous scale's u is the context: no state to carry, so the
        // pairs come a vector at a time.
        out[0] = static_cast<uint8_t>(kScaleLevels * kScaleSymbols + symbol(static_cast<uint8_t>(s[0] - m)));
        for (size_t i = 1; i < n; ++i) {
            const auto prev = static_cast<uint8_t>(s[i - 1] - m), u = static_cast<uint8_t>(s[i] - m);
            out[i] = static_cast<uint8_t>(previous_level(prev) * kScaleSymbols + symbol(u));
        }
    } else if (g.blocks_per_row == 1 && first % P == 0 && (n / P + 1) * 255 <= UINT16_MAX / kScaleSteps) {
        // One channel a position of the period, the chunk starting a period
        // (the kernel-tap periods the encoder tries): every position has
        // been seen once a period before, so the level of scale j in period
        // t is round(steps * sum_j / t), capped, from that position's sum
        // alone -- a period at a time, a vector at a time, where
        // ScaleContexts walked the counters scale by scale (the estimate was
        // a tenth of an MXFP4 file's pack time).
        thread_local std::vector<uint16_t> sum;
        sum.assign(P, 0);
        for (uint64_t t = 0, at = 0; at < n; ++t, at += P) {
            const size_t len = static_cast<size_t>(std::min<uint64_t>(P, n - at));
            const uint8_t* row = s + at;
            uint8_t* __restrict o = out + at;
            // ScaleContexts::level with chcnt = t.
            if (t == 0) {
                uint16_t* __restrict acc = sum.data();
                for (size_t j = 0; j < len; ++j) {
                    const auto u = static_cast<uint8_t>(row[j] - m);
                    o[j] = static_cast<uint8_t>(kScaleLevels * kScaleSymbols + symbol(u));
                    acc[j] = u;
                }
                continue;
            }
            const auto cnt = static_cast<int32_t>(t);
            uint16_t* __restrict acc = sum.data();
            for (size_t j = 0; j < len; ++j) {
                const auto u = static_cast<uint8_t>(row[j] - m);
                o[j] = static_cast<uint8_t>(channel_level<int32_t>(acc[j], cnt) * kScaleSymbols + symbol(u));
                acc[j] = static_cast<uint16_t>(acc[j] + u);
            }
        }
    } else {
        ScaleContexts ctx(first, g, n);
        for (size_t i = 0; i < n; ++i) {
            const auto u = static_cast<uint8_t>(s[i] - m);
            out[i] = static_cast<uint8_t>(ctx.level(i, i ? static_cast<uint8_t>(s[i - 1] - m) : 0) * kScaleSymbols + symbol(u));
            ctx.update(u);
        }
    }
}

// What the scale model would spend on `s` under `g`, in bits, with each
// context's unary decisions at their empirical frequencies (the adaptive
// nodes' learning cost left out): a fifth of the coder's time, close enough
// to rank the candidate periods. The pairs, then a histogram of them.
double scale_bits_estimate(const uint8_t* s, size_t n, uint64_t first, ScaleGeometry g, const ScaleSummary& sum_up) {
    if (n == 0) return 0;
    thread_local std::vector<uint8_t> pairs;
    scale_pairs(s, n, first, g, static_cast<uint8_t>(sum_up.min), pairs);
    std::array<uint32_t, kScalePairs> count{};
    count_scale_pairs(pairs, count);
    double bits = static_cast<double>(sum_up.escape_bits);
    for (unsigned lev = 0; lev <= kScaleLevels; ++lev) {
        uint32_t total = 0;
        for (unsigned k = 0; k < kScaleSymbols; ++k) total += count[lev * kScaleSymbols + k];
        for (unsigned k = 0; k < kScaleSymbols; ++k)
            if (const uint32_t v = count[lev * kScaleSymbols + k]) bits -= v * std::log2(static_cast<double>(v) / total);
    }
    return bits;
}

// ---------------------------------------------------------------------------
// scale-mix (codec 11): block scale tensors of either format, E8M0 (one
// byte a binade) or E4M3 (eight codes a binade, NVFP4's scales). Each byte
// is split into a high part h = byte >> m and m low bits (m = 0 for E8M0,
// 1-3 for E4M3, searched). h is coded as z = h - c around the tensor's most
// frequent high part c (8 raw bits): a sign decision, then |z| (or -z - 1) in
// unary, 12 adaptive decisions a side, Exp-Golomb in raw bits beyond -- far
// outliers (all-zero blocks, a few tiny ones) cost a few bits each, not a
// table entry. The low bits are a bit tree under z (clamped to +-6).
//
// Contexts of h, the encoder's choice per tensor (mode):
//   0: none -- scales that are independent draws code closest to their
//      order-0 entropy without contexts to learn;
//   1: the previous scale's z (clamped to -6..5);
//   2: that and a level: row mean + column mean - mean so far (the tensor is
//      taken as rows of `row` scales, weights ~ a(row) * b(column)), in half
//      steps of h around c. The period is searched (an estimate ranks the
//      candidates: the shape's last dim, 2..64, the tap periods of flattened
//      kernels).
// Each (previous, level) context's nodes start from the previous-only
// context's (as tree_inherit): a rare context codes like the coarse one
// until it has data of its own. No table to send: on tensors of a few KiB
// that is what puts it under the order-0 bound where rANS and f8-tables
// (tables, states) stay above it.
//
// Payload: the range coder's bytes alone; the parameters are its first
// raw bits (see scale_mix_payload).
struct MixParams {
    unsigned low_bits = 0;
    unsigned mode = 0;
    uint64_t row = 0;
    unsigned rates = 0;  // index in kMixRates
};

// The nodes' rates: KT (a = 1/2) or a = 1/4, which trusts a node's first
// observations more -- the better prior where a tensor's few values are
// sharply peaked; picked per tensor (one raw bit). Both forget slowly.
constexpr RateTable kMixRates[2] = {RateTable(255, 0.5), RateTable(255, 0.25)};
constexpr int kMixNear = 6;                          // contexts tell z apart within +-6
constexpr unsigned kMixLeftCtx = 2 * kMixNear + 1;   // none, z of the previous scale in -6..5
constexpr unsigned kMixLevelCtx = 2 * kMixNear + 2;  // none, level in -6..6
constexpr unsigned kMixUnary = 12;                   // adaptive unary decisions a side
constexpr unsigned kMixNodes = 2 * kMixUnary + 1;    // sign + both sides
constexpr uint16_t kMixInherit = 2;                  // a fresh fine node counts its coarse node as 2 observations
// Mode 2's row length is at most kMaxTable = 2^20: its Elias-gamma prefix
// has at most 20 ones (21 lets a decoder see a longer one, and refuse it).
constexpr unsigned kMixRowPrefixMax = 21;
// The encoder codes mode 2 with this many row lengths, the best estimates,
// on tensors up to kMixSearchAll scales (and every split and rate table);
// with one above.
constexpr size_t kMixCodedRows = 4;
constexpr size_t kMixSearchAll = 1u << 10;
// Short periods 2..kMixShortRows are screened by period_score on the
// first kMixScreenScales scales (all of a tensor scale-mix is tried on: on
// a prefix the ranking was unreliable, posenet's 9216-scale tensors lost
// their row of 24 on 8 Ki); the kMixScreenedRows best go on to the
// estimate with the shape's and the kernel taps' periods.
constexpr uint64_t kMixShortRows = 64;
constexpr size_t kMixScreenScales = 64u << 10;
constexpr size_t kMixScreenedRows = 2;
// Above kMixSearchAll, the second rate table is tried up to this size.
constexpr size_t kMixRatesSearch = 8u << 10;

// Mode 2's level: running sums over the row so far, each column's earlier
// rows and everything so far, in 1/16 of a byte step.
class MixLevel {
public:
    MixLevel(uint64_t row, uint64_t first) : R_(row), cs_(row ? row : 1), cn_(row ? row : 1), j_(row ? first % row : 0) {}
    unsigned context(unsigned center, unsigned m) const {
        if (!R_ || !gn_) return 0;
        const int64_t g = mean16(gs_, gn_);
        const int64_t r = rn_ ? mean16(rs_, rn_) : g;
        const int64_t c = cn_[j_] ? mean16(cs_[j_], cn_[j_]) : g;
        const int64_t unit = int64_t{16} << m;  // one step of h
        // Twice the distance from the middle of the center's step, rounded to steps.
        const int64_t d = 2 * (r + c - g - int64_t{center} * unit - unit / 2);
        const int64_t q = (d >= 0 ? d + unit / 2 : d - unit / 2) / unit;
        return static_cast<unsigned>(std::clamp<int64_t>(q, -kMixNear, kMixNear) + kMixNear) + 1;
    }
    void update(uint8_t v) {
        if (!R_) return;
        cs_[j_] += v, cn_[j_]++, rs_ += v, rn_++, gs_ += v, gn_++;
        if (++j_ == R_) j_ = 0, rs_ = rn_ = 0;
    }

private:
    // 16 sum / count, in 32 bits where it fits (a 64-bit division costs
    // several times a 32-bit one, and three a scale were the decoder's
    // largest cost); the same quotient either way.
    static int64_t mean16(int64_t sum, int64_t count) {
        if (sum < (int64_t{1} << 27)) return static_cast<uint32_t>(sum * 16) / static_cast<uint32_t>(count);
        return sum * 16 / count;
    }
    uint64_t R_;
    std::vector<int64_t> cs_, cn_;
    int64_t rs_ = 0, rn_ = 0, gs_ = 0, gn_ = 0;
    uint64_t j_;
};

unsigned mix_center(const uint8_t* s, size_t n, unsigned m) {
    std::array<uint32_t, 256> count{};
    for (size_t i = 0; i < n; ++i) ++count[s[i] >> m];
    return static_cast<unsigned>(std::max_element(count.begin(), count.end()) - count.begin());
}

// z of a byte for the previous-scale context: 1..12, 0 none.
inline unsigned mix_left(uint8_t v, unsigned m, unsigned center) {
    return static_cast<unsigned>(std::clamp<int>(int{v >> m} - static_cast<int>(center), -kMixNear, kMixNear - 1) + kMixNear) + 1;
}

template <class C>
void code_scale_mix(C& c, uint8_t* s, size_t n, uint64_t first, const MixParams& p) {
    if (n == 0) return;
    const unsigned m = p.low_bits, hmask = 255u >> m;
    // The center: for E8M0 (m = 0) its distance from 127 (a scale of 1),
    // sign and Exp-Golomb, in raw bits (block scales sit within a few
    // binades of 1: 4-6 bits, not 8); for E4M3 its 8 - m bits.
    unsigned center = C::kDecoding ? 0 : mix_center(s, n, m);
    if (m == 0) {
        const int d = static_cast<int>(center) - 127;
        const unsigned neg = c.raw(d < 0);
        const unsigned x = C::kDecoding ? 0 : static_cast<unsigned>(d < 0 ? -d : d) + 1;  // 1..128
        const unsigned val = context::raw_exp_golomb(c, x, 7);
        const int back = neg ? 127 - static_cast<int>(val - 1) : 127 + static_cast<int>(val - 1);
        center = static_cast<unsigned>(back) & 255;
    } else {
        unsigned x = 0;
        for (int b = 7 - static_cast<int>(m); b >= 0; --b) x = x << 1 | c.raw((center >> b) & 1);
        center = x;
    }
    std::vector<Node> fine(kMixLeftCtx * kMixLevelCtx * kMixNodes), coarse(kMixLeftCtx * kMixNodes);
    std::array<Node, (2 * kMixNear + 1) * 8> low_fine{};
    std::array<Node, 8> low_coarse{};
    MixLevel level(p.mode == 2 ? p.row : 0, first);
    for (size_t i = 0; i < n; ++i) {
        const unsigned v = C::kDecoding ? 0 : s[i];
        const int z = C::kDecoding ? 0 : static_cast<int>(v >> m) - static_cast<int>(center);
        const unsigned left = (i && p.mode) ? mix_left(s[i - 1], m, center) : 0;
        const unsigned lev = level.context(center, m);
        Node* f = &fine[(left * kMixLevelCtx + lev) * kMixNodes];
        Node* co = &coarse[left * kMixNodes];
        auto bit = [&](unsigned k, unsigned b) { return context::bit_inherit(c, f[k], co[k], b, kMixInherit); };
        const unsigned neg = bit(0, z < 0);
        const unsigned a = C::kDecoding ? 0 : static_cast<unsigned>(neg ? -z - 1 : z);
        unsigned k = 0;
        while (k < kMixUnary && bit(1 + neg * kMixUnary + k, a > k)) ++k;
        if (k == kMixUnary) k = kMixUnary - 1 + context::raw_exp_golomb(c, a - kMixUnary + 1, 8);  // a - 11 >= 1
        const int zz = neg ? -static_cast<int>(k) - 1 : static_cast<int>(k);
        const unsigned h = static_cast<unsigned>(static_cast<int>(center) + zz) & hmask;
        unsigned low = 0;
        if (m) {
            const auto zc = static_cast<unsigned>(std::clamp(zz, -kMixNear, kMixNear) + kMixNear);
            low = context::tree_inherit(c, &low_fine[zc * 8], low_coarse.data(), v & ((1u << m) - 1), kMixInherit, m);
        }
        s[i] = static_cast<uint8_t>(h << m | low);
        level.update(s[i]);
    }
}

// What mode 2 with row length `row` would spend on the high parts, in bits:
// each context's z (clamped to +-13) at its empirical frequencies plus
// half a log2 of the context's count per symbol it uses, the cost of
// learning it. Ranks the candidate row lengths without coding.
double scale_mix_estimate(const uint8_t* s, size_t n, uint64_t first, unsigned m, unsigned center, uint64_t row,
                          bool use_left = true) {
    constexpr unsigned kSyms = 2 * kMixUnary + 2;
    std::vector<uint32_t> count(kMixLeftCtx * kMixLevelCtx * kSyms);
    MixLevel level(row, first);
    for (size_t i = 0; i < n; ++i) {
        const int z = static_cast<int>(s[i] >> m) - static_cast<int>(center);
        const unsigned left = i && use_left ? mix_left(s[i - 1], m, center) : 0;
        const unsigned ctx = left * kMixLevelCtx + level.context(center, m);
        ++count[ctx * kSyms + static_cast<unsigned>(std::clamp<int>(z, -kMixUnary - 1, kMixUnary) + kMixUnary + 1)];
        level.update(s[i]);
    }
    double bits = 0;
    for (unsigned ctx = 0; ctx < kMixLeftCtx * kMixLevelCtx; ++ctx) {
        uint32_t total = 0, used = 0;
        for (unsigned k = 0; k < kSyms; ++k) total += count[ctx * kSyms + k], used += count[ctx * kSyms + k] != 0;
        if (!total) continue;
        for (unsigned k = 0; k < kSyms; ++k)
            if (const uint32_t v = count[ctx * kSyms + k]) bits -= v * std::log2(static_cast<double>(v) / total);
        bits += 0.5 * (used - 1) * std::log2(static_cast<double>(total));
    }
    return bits;
}

// What the low bits of split m would cost, in bits: their empirical
// entropy under z (clamped to +-6) plus the learning term, as above.
double scale_mix_low_estimate(const uint8_t* s, size_t n, unsigned m, unsigned center) {
    if (m == 0) return 0;
    std::array<std::array<uint32_t, 8>, 2 * kMixNear + 1> count{};
    for (size_t i = 0; i < n; ++i) {
        const int z = std::clamp(static_cast<int>(s[i] >> m) - static_cast<int>(center), -kMixNear, kMixNear);
        ++count[static_cast<unsigned>(z + kMixNear)][s[i] & ((1u << m) - 1)];
    }
    double bits = 0;
    for (const auto& c : count) {
        uint32_t total = 0, used = 0;
        for (uint32_t v : c) total += v, used += v != 0;
        if (!total) continue;
        for (uint32_t v : c)
            if (v) bits -= v * std::log2(static_cast<double>(v) / total);
        bits += 0.5 * (used - 1) * std::log2(static_cast<double>(total));
    }
    return bits;
}

// The parameters open the coded stream as raw bits (a header byte and a
// varint would cost 1-3 bytes a tensor, a percent of a 200-byte payload):
// mode (2 bits), m (one bit: m > 0, then m - 1 in 2 bits), the rate table
// (1 bit), for mode 2 the row length in Elias-gamma (2 floor(log2 row) + 1
// bits).
std::vector<uint8_t> scale_mix_payload(std::span<const uint8_t> in, uint64_t first, const MixParams& p) {
    Encoder e(kMixRates[p.rates]);
    for (int b = 1; b >= 0; --b) e.raw((p.mode >> b) & 1);
    if (e.raw(p.low_bits != 0))
        for (int b = 1; b >= 0; --b) e.raw(((p.low_bits - 1) >> b) & 1);
    e.raw(p.rates);
    if (p.mode == 2) context::raw_exp_golomb(e, p.row, kMixRowPrefixMax);  // Elias-gamma
    std::vector<uint8_t> x(in.begin(), in.end());
    code_scale_mix(e, x.data(), x.size(), first, p);
    return e.finish();
}

// ---------------------------------------------------------------------------
// FP8 E4M3 weights, whole bytes [S EEEE MMM].
//
// Weights of a layer behave like |w| ~ a(in channel) * b(out channel) * noise,
// so the exponent E is roughly additive in per-channel levels. The model keeps
// running means of E per input channel, per output channel (column) and over
// the chunk, predicts level = chan + col - global, and codes E (a 4-level bit
// tree) under that level in half-exponent steps. The mantissa is coded under
// (E, E below/near/above the predicted level) -- its skew inside a binade
// depends on where E sits --, the sign under the signs of the same filter's
// two previous kernel taps. Fine-context trees inherit fresh nodes from a
// coarse tree, so the many contexts cost little to learn. Corpus: 1.1-1.6%
// below the whole-byte order-0 bound on movenet and posenet, 0.1% above it on
// esrgan (whose channels are nearly homogeneous).
struct F8Geometry {
    uint64_t row = 1;    // elements per row: the last dim (the one before when the last is 1)
    uint64_t plane = 0;  // elements per kernel position (4-D kernels, HWIO), 0: none
};

F8Geometry f8_geometry(std::span<const uint64_t> shape) {
    F8Geometry g;
    if (shape.empty()) return g;
    const uint64_t row = (shape.back() > 1 || shape.size() < 2) ? shape.back() : shape[shape.size() - 2];
    if (row == 0 || row > kMaxTable) return g;
    g.row = row;
    if (shape.size() == 4 && shape[0] * shape[1] > 1 && shape[2] * shape[3] / row <= kMaxTable)
        g.plane = shape[2] * shape[3];
    return g;
}

constexpr RateTable kF8Rates(255, 0.5);  // KT start, then forget slowly

template <class C>
void code_f8(C& c, uint8_t* x, size_t n, uint64_t first, F8Geometry g) {
    const uint64_t row = g.row;
    // Channel index: rows repeat every plane/row rows (one per input
    // channel); without kernel positions every row of the chunk is its own.
    const bool taps = g.plane != 0;
    // Without taps a channel is one row, and rows come one after another:
    // one slot, emptied when a new row starts, holds the current row's sums.
    const uint64_t nch = taps ? std::max<uint64_t>(1, g.plane / row) : 1;
    const uint64_t plane = taps ? g.plane : n + 1;  // n + 1: no previous tap
    const uint64_t first_row = first / row;
    std::vector<Node> et(32 * 16), e0(16), mt(16 * 8), mt3(16 * 3 * 8), st(9);
    // The per-column and per-channel tables hold only what this chunk
    // touches. Sized by the layout (up to kMaxTable entries each), a chunk of
    // a few bytes in a tensor with rows of 2^20 cleared 32 MiB of them:
    // 7 ms a chunk, from a header that costs a few bytes to write. A chunk
    // shorter than a row sees each column once, so its column slot can be
    // its position i; one spanning fewer rows than there are channels sees
    // each channel once, so its slot can be its row's number in the chunk.
    // Either way a slot is empty exactly when the full table's entry would
    // be: the coding, and every payload, stays the same.
    const bool col_by_i = n < row;
    const uint64_t rows_touched = n ? (first + n - 1) / row - first_row + 1 : 0;
    const bool ch_by_row = taps && rows_touched < nch;
    // Sums of 16 E and counts, 64-bit: 2^28 bytes of E = 15 overflow 32 bits.
    std::vector<int64_t> chs(ch_by_row ? rows_touched : nch), chn(chs.size()), cls(col_by_i ? n : row), cln(cls.size());
    int64_t gs = 0, gn = 0;
    for (size_t i = 0; i < n; ++i) {
        const uint64_t at = first + i;
        const size_t col = at % row;
        const size_t j = col_by_i ? i : col;
        const size_t ch = !taps ? 0 : ch_by_row ? at / row - first_row : (at / row) % nch;
        if (!taps && col == 0 && at / row != first_row) chs[0] = 0, chn[0] = 0;
        // Means of 16 E: 0..240.
        const auto gl = static_cast<int32_t>(gn ? gs / gn : 8 * 16);
        const auto a = static_cast<int32_t>(chn[ch] ? chs[ch] / chn[ch] : gl);
        const auto b = static_cast<int32_t>(cln[j] ? cls[j] / cln[j] : gl);
        const unsigned ectx = static_cast<unsigned>(std::clamp<int32_t>((a + b - gl) / 8, 0, 31));
        const uint8_t v = C::kDecoding ? 0 : x[i];
        const unsigned e = context::tree_inherit<4>(c, &et[ectx * 16], e0.data(), (v >> 3) & 15, 6);
        const int32_t d = static_cast<int32_t>(e) * 16 - (a + b - gl);
        const unsigned rel = d < -24 ? 0 : d > 24 ? 2 : 1;
        const unsigned m = context::tree_inherit<3>(c, &mt3[(e * 3 + rel) * 8], &mt[e * 8], v & 7, 6);
        const unsigned s1 = i >= plane ? 1 + (x[i - plane] >> 7) : 0;
        const unsigned s3 = i >= 3 * plane ? 1 + (x[i - 3 * plane] >> 7) : 0;
        const unsigned s = c.bit(st[s1 * 3 + s3], v >> 7);
        x[i] = static_cast<uint8_t>(s << 7 | e << 3 | m);
        const int32_t e16 = static_cast<int32_t>(e) * 16;
        chs[ch] += e16, chn[ch]++;
        cls[j] += e16, cln[j]++;
        gs += e16, gn++;
    }
}

// ---------------------------------------------------------------------------
// MXFP4 blocks: E2M1 nibbles (sign << 3 | magnitude index m of
// {0, .5, 1, 1.5, 2, 3, 4, 6}), low nibble = even element, 32 values per
// 16-byte block sharing one E8M0 scale, which the reader has decoded first.
//
// The magnitude (a 3-level bit tree) is coded under g = min(scale - the
// chunk's smallest non-zero scale, 3), the block's relative scale (the group
// of the grouped decomposition), and the level of the element's column: a
// running mean of log2|x| in quarter steps (4 scale + lg4[m]) over the
// column's earlier elements, in this block's units, quantised to 11 levels
// plus "no history". Each (g, level) tree inherits from the per-g tree, so
// 48 contexts cost little more to learn than 4. The sign is coded under
// (m == 0). The column length is not in the blocks' shape ([blocks, 16]),
// so the encoder tries a few and writes its pick first, as a varint.
constexpr RateTable kFp4Rates(1023, 0.5);  // near-stationary: forget very slowly
constexpr uint64_t kFp4Rows[] = {32, 64, 128, 256};

template <class C>
void code_fp4(C& c, uint8_t* b, std::span<const uint8_t> sc, uint64_t first, uint64_t row) {
    static constexpr int lg4[8] = {-4, 0, 4, 6, 8, 10, 12, 14};  // ~4 log2(value / 0.5)
    const size_t n = sc.size() * 32;
    int smin = 255;
    for (uint8_t s : sc)
        if (s) smin = std::min<int>(smin, s);
    std::vector<Node> mt(4 * 12 * 8), mg(4 * 8);
    Node st[2];
    // Column sums for the columns this chunk touches (see code_f8): a
    // chunk shorter than a row sees each column once, in slot k.
    const bool col_by_k = n < row;
    std::vector<int64_t> cs(col_by_k ? n : row), cn(cs.size());  // 64-bit: up to 2^29 elements a chunk
    for (size_t k = 0; k < n; ++k) {
        const size_t blk = k >> 5, j = col_by_k ? k : (first + k) % row;
        const unsigned g = static_cast<unsigned>(std::clamp<int>(sc[blk] - smin, 0, 3));
        unsigned q = 0;
        if (cn[j]) q = static_cast<unsigned>(std::clamp<int64_t>((cs[j] / cn[j] - int{sc[blk]} * 4 + 4) / 2, 1, 11));
        const unsigned v = C::kDecoding ? 0 : (b[k >> 1] >> ((k & 1) * 4)) & 15;
        const unsigned m = context::tree_inherit<3>(c, &mt[(g * 12 + q) * 8], &mg[g * 8], v & 7, 6);
        const unsigned s = c.bit(st[m == 0], v >> 3);
        const unsigned x = s << 3 | m;
        if (k & 1) b[k >> 1] = static_cast<uint8_t>((b[k >> 1] & 0x0F) | x << 4);
        else b[k >> 1] = static_cast<uint8_t>((b[k >> 1] & 0xF0) | x);
        cs[j] += int{sc[blk]} * 4 + lg4[m];
        cn[j]++;
    }
}

// The elements (bytes) of the tensor a chunk belongs to, or at least the
// chunk's end in it when the layout has no shape. A period or column length
// in a payload is never more than this for what an encoder writes: checking
// it keeps a few hostile payload bytes from asking for megabytes of tables
// to decode a handful of bytes.
uint64_t tensor_extent(const TensorLayout& layout, size_t n) {
    uint64_t elements = 1;
    for (uint64_t d : layout.shape) elements = d && elements > kMaxTable * 64 / d ? kMaxTable * 64 : elements * d;
    return std::max<uint64_t>(elements, layout.offset + n);
}

}  // namespace

std::vector<uint8_t> encode_fp4(std::span<const uint8_t> in, const TensorLayout& layout) {
    if (layout.scales.size() * 16 != in.size()) throw Error("FP4 model: the scales do not cover the blocks");
    std::vector<uint8_t> best;
    for (uint64_t row : kFp4Rows) {
        std::vector<uint8_t> x(in.begin(), in.end());
        Encoder e(kFp4Rates);
        code_fp4(e, x.data(), layout.scales, layout.offset * 2, row);
        std::vector<uint8_t> out;
        put_varint(out, row);
        const auto body = e.finish();
        out.insert(out.end(), body.begin(), body.end());
        if (best.empty() || out.size() < best.size()) best = std::move(out);
    }
    return best;
}

void decode_fp4(std::span<const uint8_t> payload, std::span<uint8_t> out, const TensorLayout& layout) {
    if (layout.scales.size() * 16 != out.size()) throw CorruptData("FP4 model: the scales do not cover the blocks");
    const uint64_t row = get_varint(payload, "context model");
    // The encoder's column lengths are kFp4Rows.
    if (row == 0 || row > kMaxTable || row > std::max<uint64_t>(kFp4Rows[std::size(kFp4Rows) - 1], 2 * tensor_extent(layout, out.size())))
        throw CorruptData("FP4 model: bad row length");
    Decoder d(kFp4Rates, payload);
    code_fp4(d, out.data(), layout.scales, layout.offset * 2, row);
}

ScalePlan plan_scales(std::span<const uint8_t> in, const TensorLayout& layout) {
    std::vector<ScaleGeometry> tries = {scale_geometry(layout.shape)};
    // Periods relative to the whole tensor need the chunk to be all of it.
    const uint64_t n = in.size();
    if (layout.offset == 0)
        for (uint64_t taps : kScaleTaps)
            if (n % taps == 0 && n / taps >= 8) tries.push_back({1, n / taps});
    // Only the period with the smallest estimate is coded. The estimate
    // leaves out the adaptive nodes' learning, which differs between periods
    // by a few bytes: on the corpus's 153 MXFP4 scale tensors, coding every
    // period and keeping the smallest saved 30 bytes in all (0.001% of the
    // store) for four times the work.
    size_t pick = 0;
    const ScaleSummary sum_up = summarize_scales(in.data(), n);
    double pick_bits = scale_bits_estimate(in.data(), n, layout.offset, tries[0], sum_up);
    for (size_t k = 1; k < tries.size(); ++k) {
        const double bits = scale_bits_estimate(in.data(), n, layout.offset, tries[k], sum_up);
        if (bits < pick_bits) pick = k, pick_bits = bits;
    }
    const ScaleGeometry& g = tries[pick];
    // The payload: two varints, then the coder's bytes for the minimum's 8
    // raw bits and the decisions. The estimate is their empirical entropy
    // under the contexts, which a coder with fixed probabilities per context
    // cannot beat -- but the nodes adapt and forget, and follow drifting
    // statistics: on the corpus's and derived files' 542 scale tensors
    // the payload was at most 0.8% below the estimate (movenet MXFP4), on
    // synthetic scales whose level drifts 10-18%. So the floor is 15% below
    // it, less 4 bytes for the range coder's flush: a heuristic, like the
    // zstd sample, which left every corpus and derived store as it was.
    std::vector<uint8_t> head;
    put_varint(head, g.blocks_per_tap);
    put_varint(head, g.blocks_per_row);
    const double floor = static_cast<double>(head.size()) + kScaleFloorShare * (8 + pick_bits) / 8 - 4;
    return {g.blocks_per_row, g.blocks_per_tap, std::max(0.0, floor)};
}

std::vector<uint8_t> encode_scales(std::span<const uint8_t> in, const TensorLayout& layout, const ScalePlan& plan) {
    const ScaleGeometry g{plan.blocks_per_row, plan.blocks_per_tap};
    // The coder's bytes in a per-thread buffer of the worst case: a scale
    // is at most four decisions of at most 11 bits (p0 is clamped to
    // [32, 65504] / 2^16) and 17 raw Exp-Golomb bits, under 8 bytes; then
    // the minimum's 8 bits and the flush.
    thread_local Scratch t_bytes;
    context::BasicEncoder<range::BoundedBytes> e(kScaleRates, range::BoundedBytes(t_bytes.get(8 * in.size() + 32)));
    if (!in.empty()) {
        const ScaleSummary sum_up = summarize_scales(in.data(), in.size());
        code_scale_min(e, sum_up.min);
        // The contexts come from the same pass as the estimate's, a vector
        // at a time where the layout allows, instead of scale by scale.
        thread_local std::vector<uint8_t> pairs;
        scale_pairs(in.data(), in.size(), layout.offset, g, static_cast<uint8_t>(sum_up.min), pairs);
        Node nodes[(kScaleLevels + 1) * 4];
        for (size_t i = 0; i < in.size(); ++i)
            code_scale_u(e, &nodes[pairs[i] / kScaleSymbols * 4], in[i] - sum_up.min);
    }
    std::vector<uint8_t> out;
    put_varint(out, g.blocks_per_tap);
    put_varint(out, g.blocks_per_row);
    const auto body = e.finish();
    out.insert(out.end(), body.begin(), body.end());
    return out;
}

std::vector<uint8_t> encode_scales(std::span<const uint8_t> in, const TensorLayout& layout) {
    return encode_scales(in, layout, plan_scales(in, layout));
}

void decode_scales(std::span<const uint8_t> payload, std::span<uint8_t> out, const TensorLayout& layout) {
    ScaleGeometry g;
    g.blocks_per_tap = get_varint(payload, "context model");
    g.blocks_per_row = get_varint(payload, "context model");
    if (g.blocks_per_row == 0 || g.blocks_per_tap > kMaxTable || (g.blocks_per_tap && g.blocks_per_row > g.blocks_per_tap) ||
        g.blocks_per_tap > tensor_extent(layout, out.size()))
        throw CorruptData("scale model: bad channel period");
    Decoder d(kScaleRates, payload);
    decode_scale_values(d, out.data(), out.size(), layout.offset, g);
}

// How much of the scales' variance rows of `row` scales explain, by their
// row means and column means (mode 2's level), less what as many free means
// would explain in noise: a cheap first ranking of the short periods (one
// pass, no division a scale), the best going on to scale_mix_estimate.
double period_score(const uint8_t* s, size_t n, uint64_t row) {
    std::vector<int64_t> col_sum(row), col_cnt(row);
    int64_t total = 0, total_sq = 0, row_sum = 0;
    double rows_ss = 0;  // sum over full rows of row_sum^2 / row
    for (size_t i = 0, j = 0; i < n; ++i) {
        const int64_t v = s[i];
        total += v, total_sq += v * v, row_sum += v;
        col_sum[j] += v, col_cnt[j]++;
        if (++j == row) {
            rows_ss += static_cast<double>(row_sum) * static_cast<double>(row_sum) / static_cast<double>(row);
            j = 0, row_sum = 0;
        }
    }
    const double nd = static_cast<double>(n), mean_ss = static_cast<double>(total) * static_cast<double>(total) / nd;
    double cols_ss = 0;
    for (uint64_t j = 0; j < row; ++j)
        if (col_cnt[j]) cols_ss += static_cast<double>(col_sum[j]) * static_cast<double>(col_sum[j]) / static_cast<double>(col_cnt[j]);
    const double noise = (static_cast<double>(total_sq) - mean_ss) / nd;  // variance a scale
    const double params = static_cast<double>(row) + nd / static_cast<double>(row);
    return (rows_ss - mean_ss) + (cols_ss - mean_ss) - params * noise;
}

std::vector<uint8_t> encode_scale_mix(std::span<const uint8_t> in, const TensorLayout& layout) {
    const uint64_t n = in.size();
    const bool small = n <= kMixSearchAll;
    // Row lengths for mode 2: the shape's last dim (NVFP4: scales per row),
    // the periods of flattened kernels' taps, and the short periods (a
    // flattened kernel's out_channels / 32 or / 16 per input channel) whose
    // row and column means explain most (period_score).
    std::vector<uint64_t> rows;
    if (layout.shape.size() >= 2) rows.push_back(layout.shape.back());
    if (layout.offset == 0)
        for (uint64_t taps : kScaleTaps)
            if (n % taps == 0) rows.push_back(n / taps);
    {
        const size_t screen = std::min<size_t>(n, kMixScreenScales);
        std::vector<std::pair<double, uint64_t>> near;  // -score: best first
        for (uint64_t r = 2; r <= kMixShortRows && r < screen; ++r) near.emplace_back(-period_score(in.data(), screen, r), r);
        const size_t keep = std::min(near.size(), kMixScreenedRows);
        std::partial_sort(near.begin(), near.begin() + static_cast<long>(keep), near.end());
        for (size_t k = 0; k < keep; ++k) rows.push_back(near[k].second);
    }
    std::erase_if(rows, [&](uint64_t r) { return r < 2 || r >= n || r > kMaxTable; });
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    // E4M3 bytes: 1-3 low bits; E8M0 (and U8) bytes are all exponent.
    // Above kMixSearchAll the split is picked by the estimate (its high
    // parts under the previous scale, plus its low bits).
    std::vector<unsigned> lows = {0};
    double left_only_bits = -1;  // mode 1's estimate of the split picked, when known
    if (layout.dtype == DType::F8_E4M3) {
        lows = {1, 2, 3};
        if (!small) {
            double best_bits = 0;
            unsigned best_m = 0;
            for (unsigned m : lows) {
                const unsigned center = mix_center(in.data(), n, m);
                const double left = scale_mix_estimate(in.data(), n, layout.offset, m, center, 0);
                const double bits = left + scale_mix_low_estimate(in.data(), n, m, center);
                if (!best_m || bits < best_bits) best_m = m, best_bits = bits, left_only_bits = left;
            }
            lows = {best_m};
        }
    }
    // Small tensors code every split, context set and rate table with the
    // best few rows; larger ones their split under no context and under the
    // better estimate of modes 1 and 2 (its best row), with KT rates, then,
    // up to kMixRatesSearch scales, the winner under the other rates: two
    // or three codings.
    std::vector<uint8_t> best;
    MixParams best_p;
    for (unsigned m : lows) {
        const unsigned center = mix_center(in.data(), n, m);
        std::vector<std::pair<double, uint64_t>> ranked;
        for (uint64_t r : rows) ranked.emplace_back(scale_mix_estimate(in.data(), n, layout.offset, m, center, r), r);
        const size_t keep = std::min(ranked.size(), small ? kMixCodedRows : size_t{1});
        std::partial_sort(ranked.begin(), ranked.begin() + static_cast<long>(keep), ranked.end());
        std::vector<MixParams> tries;
        if (small) {
            tries = {{m, 0, 0}, {m, 1, 0}};
            for (size_t k = 0; k < keep; ++k) tries.push_back({m, 2, ranked[k].second});
        } else {
            // Whichever of modes 1 and 2 estimates smaller, and mode 0
            // (where the estimate of contexts is least sure: up to
            // kMixRatesSearch scales, or where it is the better estimate).
            const double one =
                left_only_bits >= 0 ? left_only_bits : scale_mix_estimate(in.data(), n, layout.offset, m, center, 0);
            const bool two = !ranked.empty() && ranked[0].first < one;
            tries.push_back(two ? MixParams{m, 2, ranked[0].second} : MixParams{m, 1, 0});
            if (n <= kMixRatesSearch ||
                scale_mix_estimate(in.data(), n, layout.offset, m, center, 0, false) < std::min(one, two ? ranked[0].first : one))
                tries.push_back({m, 0, 0});
        }
        for (MixParams p : tries)
            for (unsigned rates = 0; rates < (small ? std::size(kMixRates) : 1); ++rates) {
                p.rates = rates;
                auto out = scale_mix_payload(in, layout.offset, p);
                if (best.empty() || out.size() < best.size()) best = std::move(out), best_p = p;
            }
    }
    if (!small && n <= kMixRatesSearch)
        for (unsigned rates = 1; rates < std::size(kMixRates); ++rates) {
            MixParams p = best_p;
            p.rates = rates;
            auto out = scale_mix_payload(in, layout.offset, p);
            if (out.size() < best.size()) best = std::move(out);
        }
    return best;
}

void decode_scale_mix(std::span<const uint8_t> payload, std::span<uint8_t> out, const TensorLayout& layout) {
    Decoder d(kMixRates[0], payload);
    MixParams p;
    for (int b = 0; b < 2; ++b) p.mode = p.mode << 1 | d.raw();
    if (d.raw()) {
        for (int b = 0; b < 2; ++b) p.low_bits = p.low_bits << 1 | d.raw();
        if (++p.low_bits > 3) throw CorruptData("scale-mix: more than 3 low bits");
    }
    p.rates = d.raw();
    d.set_table(kMixRates[p.rates]);
    if (p.mode > 2) throw CorruptData("scale-mix: unknown mode");
    if (p.mode == 2) {
        const uint64_t row = context::raw_exp_golomb(d, uint64_t{0}, kMixRowPrefixMax);
        // The encoder's rows are at most kMaxTable and shorter than the chunk.
        if (row < 2 || row >= out.size() || row > kMaxTable || row > tensor_extent(layout, out.size()))
            throw CorruptData("scale-mix: bad row length");
        p.row = row;
    }
    code_scale_mix(d, out.data(), out.size(), layout.offset, p);
}

std::vector<uint8_t> encode_f8(std::span<const uint8_t> in, const TensorLayout& layout) {
    std::vector<uint8_t> x(in.begin(), in.end());
    Encoder e(kF8Rates);
    code_f8(e, x.data(), x.size(), layout.offset, f8_geometry(layout.shape));
    return e.finish();
}

void decode_f8(std::span<const uint8_t> payload, std::span<uint8_t> out, const TensorLayout& layout) {
    Decoder d(kF8Rates, payload);
    code_f8(d, out.data(), out.size(), layout.offset, f8_geometry(layout.shape));
}

}  // namespace ptwm::models
