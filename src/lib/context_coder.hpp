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

namespace ptwm::context {

constexpr unsigned kPBits = 16;  // probability precision; range >= 2^24 keeps >= 8 bits for the split
constexpr uint32_t kTop = 1u << 24;

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

class Encoder {
public:
    explicit Encoder(const RateTable& t) : t_(t) {}
    unsigned bit(Node& node, unsigned b) {
        code(node.p0(), b);
        node.update(b, t_);
        return b;
    }
    // A bit at probability 1/2, no model (escape codes, raw values).
    unsigned raw(unsigned b) { code(1u << (kPBits - 1), b); return b; }
    std::vector<uint8_t> finish() {
        // Any value in [low, low + range) decodes the same. Pick the one with
        // the most trailing zero bits; the decoder reads zeros past the end,
        // so those bytes need not be stored (saves ~3 bytes per stream,
        // which matters on 50-byte scale tensors).
        for (int k = 32; k >= 0; --k) {
            const uint64_t mask = (uint64_t{1} << k) - 1;
            const uint64_t v = (low_ + mask) & ~mask;
            if (v <= low_ + range_ - 1) { low_ = v; break; }
        }
        for (int i = 0; i < 5; ++i) shift_low();
        while (!bytes_.empty() && bytes_.back() == 0) bytes_.pop_back();
        // The first byte is always the zero "cache" placeholder: drop it.
        if (bytes_.empty()) return {};
        return std::vector<uint8_t>(bytes_.begin() + 1, bytes_.end());
    }
    const RateTable& table() const { return t_; }
    static constexpr bool kDecoding = false;

private:
    void code(uint32_t p0, unsigned b) {
        const uint32_t bound = (range_ >> kPBits) * p0;
        if (b == 0) range_ = bound;
        else { low_ += bound; range_ -= bound; }
        while (range_ < kTop) { range_ <<= 8; shift_low(); }
    }
    // Carry propagation: a byte is held back (cache_) until it is known
    // whether a later carry will increment it.
    void shift_low() {
        if (static_cast<uint32_t>(low_) < 0xFF000000u || (low_ >> 32) != 0) {
            const auto carry = static_cast<uint8_t>(low_ >> 32);
            uint8_t temp = cache_;
            do { bytes_.push_back(static_cast<uint8_t>(temp + carry)); temp = 0xFF; } while (--pending_ != 0);
            cache_ = static_cast<uint8_t>(low_ >> 24);
        }
        ++pending_;
        low_ = (low_ & 0x00FFFFFFu) << 8;
    }
    const RateTable& t_;
    uint64_t low_ = 0;
    uint32_t range_ = 0xFFFFFFFFu;
    uint8_t cache_ = 0;
    uint64_t pending_ = 1;
    std::vector<uint8_t> bytes_;
};

class Decoder {
public:
    Decoder(const RateTable& t, std::span<const uint8_t> in) : t_(t), in_(in) {
        for (int i = 0; i < 4; ++i) code_ = (code_ << 8) | next();
    }
    unsigned bit(Node& node, unsigned = 0) {
        const unsigned b = decode(node.p0());
        node.update(b, t_);
        return b;
    }
    unsigned raw(unsigned = 0) { return decode(1u << (kPBits - 1)); }
    const RateTable& table() const { return t_; }
    static constexpr bool kDecoding = true;

private:
    unsigned decode(uint32_t p0) {
        const uint32_t bound = (range_ >> kPBits) * p0;
        unsigned b;
        if (code_ < bound) { range_ = bound; b = 0; }
        else { code_ -= bound; range_ -= bound; b = 1; }
        while (range_ < kTop) { range_ <<= 8; code_ = (code_ << 8) | next(); }
        return b;
    }
    // Past the end reads zeros: a damaged payload decodes to wrong values,
    // never reads out of bounds.
    uint32_t next() { return at_ < in_.size() ? in_[at_++] : 0; }
    const RateTable& t_;
    std::span<const uint8_t> in_;
    size_t at_ = 0;
    uint32_t code_ = 0;
    uint32_t range_ = 0xFFFFFFFFu;
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
template <unsigned Bits, class C>
inline unsigned tree_inherit(C& c, Node* fine, Node* coarse, unsigned sym, uint16_t k) {
    unsigned m = 1;
    for (int i = Bits - 1; i >= 0; --i) {
        Node& f = fine[m];
        if (f.n == 0) { f.p = coarse[m].p; f.n = k; }
        const unsigned b = c.bit(f, (sym >> i) & 1);
        coarse[m].update(b, c.table());
        m = (m << 1) | b;
    }
    return m - (1u << Bits);
}
}  // namespace ptwm::context
