// The binary range coder under the context models (scale_model, f8_model).
//
// One `Coder` interface serves both directions: `bit(node, b)` encodes b (and
// returns it) in the encoder, decodes and returns the bit in the decoder
// (ignoring b). A model written once against it cannot drift out of sync
// between its encoder and decoder.
#pragma once
#include <cstdint>
#include <cstddef>
#include <span>
#include <vector>

#include "codecs/range_coder.hpp"

namespace ptwm::context {

constexpr unsigned kPBits = 16;  // probability precision; range >= 2^24 keeps >= 8 bits for the split

// Adaptive-rate probability: after n observations the update rate is
// 1/(n + 1 + 2a) -- exactly the Dirichlet(a) (KT for a = 1/2) posterior mean
// for a stationary source -- until n reaches a cap, after which the rate
// stays fixed, so old statistics fade exponentially. Cheap (4 bytes, one
// multiply), learns as fast as KT counts on a fresh node.
struct RateTable {
    uint16_t r[4096];  // r[n] = 2^16 / (n + 1 + 2a)
    unsigned limit;    // n stops growing here: rate floor 1 / (limit + 1 + 2a)
    constexpr RateTable(unsigned lim, double a) : r{}, limit(lim) {
        for (unsigned n = 0; n < 4096; ++n) {
            const double v = 65536.0 / (n + 1 + 2 * a) + 0.5;
            r[n] = static_cast<uint16_t>(v > 65535 ? 65535 : v);
        }
    }
};

struct Node {
    uint16_t p = 1u << (kPBits - 1);  // P(bit = 0) * 2^16
    uint16_t n = 0;                   // observations so far, saturating at the table's limit
    uint32_t p0() const { return p < 32 ? 32 : p > 65504 ? 65504 : p; }
    void update(unsigned b, const RateTable& t) {
        const int32_t target = b ? 0 : 65535;
        p = static_cast<uint16_t>(p + (((target - int32_t(p)) * int32_t(t.r[n])) >> 16));
        if (n < t.limit) ++n;
    }
};

// `Bytes`: where the range coder's bytes go (range_coder.hpp).
template <class Bytes = range::GrowingBytes>
class BasicEncoder {
public:
    explicit BasicEncoder(const RateTable& t, Bytes out = {}) : t_(&t), rc_(std::move(out)) {}
    unsigned bit(Node& node, unsigned b) {
        code(node.p0(), b);
        node.update(b, *t_);
        return b;
    }
    // A bit at probability 1/2, no model (escape codes, raw values).
    unsigned raw(unsigned b) {
        code(1u << (kPBits - 1), b);
        return b;
    }
    std::vector<uint8_t> finish() {
        // Any value in [low, low + range) decodes the same. Pick the one with
        // the most trailing zero bits; the decoder reads zeros past the end,
        // so those bytes need not be stored (saves ~3 bytes per stream,
        // which matters on 50-byte scale tensors).
        const uint64_t low = rc_.low();
        for (int k = 32; k >= 0; --k) {
            const uint64_t mask = (uint64_t{1} << k) - 1;
            const uint64_t v = (low + mask) & ~mask;
            if (v <= low + rc_.range() - 1) {
                rc_.set_low(v);
                break;
            }
        }
        std::vector<uint8_t> bytes = rc_.finish(5);
        while (!bytes.empty() && bytes.back() == 0) bytes.pop_back();
        // The first byte is always the zero "cache" placeholder: drop it.
        if (bytes.empty()) return {};
        bytes.erase(bytes.begin());
        return bytes;
    }
    const RateTable& table() const { return *t_; }
    // From here on, nodes adapt at this table's rates (a model whose rates
    // are a parameter in its stream switches after reading it).
    void set_table(const RateTable& t) { t_ = &t; }
    static constexpr bool kDecoding = false;

private:
    void code(uint32_t p0, unsigned b) { rc_.code((rc_.range() >> kPBits) * p0, b); }
    const RateTable* t_;
    range::BasicEncoder<Bytes> rc_;
};
using Encoder = BasicEncoder<>;

class Decoder {
public:
    // The encoder dropped its placeholder byte: four bytes start the code.
    Decoder(const RateTable& t, std::span<const uint8_t> in) : t_(&t), rc_(in, 4) {}
    unsigned bit(Node& node, unsigned = 0) {
        const unsigned b = decode(node.p0());
        node.update(b, *t_);
        return b;
    }
    unsigned raw(unsigned = 0) { return decode(1u << (kPBits - 1)); }
    const RateTable& table() const { return *t_; }
    void set_table(const RateTable& t) { t_ = &t; }
    static constexpr bool kDecoding = true;

private:
    unsigned decode(uint32_t p0) { return rc_.decode((rc_.range() >> kPBits) * p0); }
    const RateTable* t_;
    range::Decoder rc_;
};

// `Bits`-level binary tree over nodes[1 .. 2^Bits - 1]; MSB first.
template <unsigned Bits, class C>
inline unsigned tree(C& c, Node* nodes, unsigned sym) {
    unsigned m = 1;
    for (int i = Bits - 1; i >= 0; --i) m = (m << 1) | c.bit(nodes[m], (sym >> i) & 1);
    return m - (1u << Bits);
}

}  // namespace ptwm::context

namespace ptwm::context {
// Bit tree under a fine context whose fresh nodes start from a shared coarse
// tree: a node seen for the first time copies the coarse node's probability
// and counts it as `k` observations. Both trees are updated. This cuts the
// learning cost of many contexts: a rarely-used context codes like the
// coarse model until it has data of its own.
//
// One such decision: at a fine node, started from its coarse node.
template <class C>
inline unsigned bit_inherit(C& c, Node& fine, Node& coarse, unsigned b, uint16_t k) {
    if (fine.n == 0) fine.p = coarse.p, fine.n = k;
    b = c.bit(fine, b);
    coarse.update(b, c.table());
    return b;
}

// A tree of `bits` levels of them (bits known only at run time).
template <class C>
inline unsigned tree_inherit(C& c, Node* fine, Node* coarse, unsigned sym, uint16_t k, unsigned bits) {
    unsigned m = 1;
    for (int i = static_cast<int>(bits) - 1; i >= 0; --i) m = (m << 1) | bit_inherit(c, fine[m], coarse[m], (sym >> i) & 1, k);
    return m - (1u << bits);
}

template <unsigned Bits, class C>
inline unsigned tree_inherit(C& c, Node* fine, Node* coarse, unsigned sym, uint16_t k) {
    return tree_inherit(c, fine, coarse, sym, k, Bits);
}

// Exp-Golomb (order 0) of x >= 1 in raw decisions: q ones, then a zero
// unless q = max_q, then the q bits of x below its leading one, MSB first.
// Returns x (what a decoder read; x itself is ignored when decoding).
template <class C, class T>
inline T raw_exp_golomb(C& c, T x, unsigned max_q) {
    unsigned nb = 0;
    if (!C::kDecoding)
        while ((x >> (nb + 1)) != 0) ++nb;
    unsigned q = 0;
    while (q < max_q && c.raw(q < nb)) ++q;
    T val = 1;
    for (int b = static_cast<int>(q) - 1; b >= 0; --b) val = val << 1 | c.raw((x >> b) & 1);
    return val;
}
}  // namespace ptwm::context
