#include "ptwm/codecs/adaptive_coder.hpp"

#include <array>
#include <atomic>
#include <bitset>
#include <cmath>
#include <mutex>
#include <string>

#include "base/scratch.hpp"
#include "codecs/range_coder.hpp"
#include "ptwm/base/error.hpp"

namespace ptwm::adaptive {
namespace {

constexpr unsigned kProbBits = 12;
// Counts are halved past this total: old statistics fade, so the model
// follows a plane whose distribution drifts along the tensor.
constexpr uint32_t kCountLimit = 1024;

// One binary decision's statistics. The probability is the Krichevsky-
// Trofimov estimate (n0 + 1/2) / (n + 1): a node that always goes one way
// costs about log2(n)/2 bits in all, which a fixed-rate update cannot
// match on the skewed, mostly deterministic trees of small alphabets.
// 2^32 / d for every denominator the estimate can have: a multiply instead
// of a division per coded bit (encoder and decoder use the same table, so
// the rounding is the same on both sides).
struct Reciprocals {
    static constexpr uint32_t kMax = 2 * (kCountLimit + 1) + 2;
    uint64_t r[kMax + 1];
    Reciprocals() {
        for (uint32_t d = 1; d <= kMax; ++d) r[d] = (uint64_t{1} << 32) / d;
    }
};
const Reciprocals kReciprocals;

// P(0) is kept with the counts, computed when they change: a tree's next
// decision (a child node) then waits on one load, not on a reciprocal's
// load and two multiplies (the decoder's chain from one bit to the next).
struct Node {
    uint16_t n0 = 0, n1 = 0;
    uint32_t p = 1u << (kProbBits - 1);  // (2 n0 + 1) / (2 n + 2) in kProbBits bits, clamped to [1, 2^12 - 1]
    uint32_t p0() const { return p; }
    void update(unsigned b) {
        (b ? n1 : n0)++;
        if (n0 + n1 > kCountLimit) n0 = static_cast<uint16_t>((n0 + 1) / 2), n1 = static_cast<uint16_t>((n1 + 1) / 2);
        const auto q = static_cast<uint32_t>(((uint64_t{2} * n0 + 1) << kProbBits) * kReciprocals.r[2u * (n0 + n1) + 2] >> 32);
        p = q < 1 ? 1 : q > (1u << kProbBits) - 1 ? (1u << kProbBits) - 1 : q;
    }
};

// `Bytes`: where the range coder's bytes go (range_coder.hpp).
template <class Bytes = range::GrowingBytes>
class BasicEncoder {
public:
    BasicEncoder() = default;
    explicit BasicEncoder(Bytes out) : rc_(std::move(out)) {}
    void bit(Node& node, unsigned b) {
        rc_.code((rc_.range() >> kProbBits) * node.p0(), b);
        node.update(b);
    }
    // Appends the stream (placeholder byte included) to `out`.
    std::vector<uint8_t> finish(std::vector<uint8_t> out) {
        const std::vector<uint8_t> bytes = rc_.finish(5);
        out.insert(out.end(), bytes.begin(), bytes.end());
        return out;
    }

private:
    range::BasicEncoder<Bytes> rc_;
};
using Encoder = BasicEncoder<>;

// The most bytes the range coder writes for `decisions` decisions: each
// costs at most 12 bits and a little (p0 is clamped to [1, 4095] / 2^12, and
// the range keeps at least 24 bits), plus the placeholder byte, a carry's
// pending byte and the 5 bytes of the flush.
size_t most_coder_bytes(size_t decisions) { return (decisions * 13 + 7) / 8 + 16; }

class Decoder {
public:
    explicit Decoder(std::span<const uint8_t> in) : rc_(in, 5) {}
    unsigned bit(Node& node) {
        const unsigned b = rc_.decode((rc_.range() >> kProbBits) * node.p0());
        node.update(b);
        return b;
    }

private:
    range::Decoder rc_;
};

// One bit tree of `Bits` levels: node 1 is the root, node m's children are 2m and 2m+1.
template <unsigned Bits>
struct BitTree {
    Node p[1u << Bits];
    template <class E>
    void encode(E& e, unsigned sym) {
        unsigned m = 1;
        for (int i = Bits - 1; i >= 0; --i) {
            const unsigned b = (sym >> i) & 1;
            e.bit(p[m], b);
            m = (m << 1) | b;
        }
    }
    unsigned decode(Decoder& d) {
        unsigned m = 1;
        for (unsigned i = 0; i < Bits; ++i) m = (m << 1) | d.bit(p[m]);
        return m - (1u << Bits);
    }
};

}  // namespace

std::vector<uint8_t> encode_bytes(std::span<const uint8_t> in, unsigned order) {
    std::vector<BitTree<8>> trees(order ? 256 : 1);
    // The coder's bytes in a per-thread buffer of the worst case, not a
    // vector grown byte by byte: the vector's stores may alias the coder's
    // state, which the compiler then kept in memory, not registers (as the
    // scale model's encoder did; see range::BoundedBytes).
    thread_local Scratch t_bytes;
    BasicEncoder<range::BoundedBytes> e(range::BoundedBytes(t_bytes.get(most_coder_bytes(8 * in.size()))));
    uint8_t prev = 0;
    for (uint8_t b : in) {
        trees[order ? prev : 0].encode(e, b);
        prev = b;
    }
    return e.finish({static_cast<uint8_t>(order)});
}

namespace {

// log2 Gamma(k + 1/2) and log2 Gamma(k + 1), k = 0 .. kCountLimit + 1.
struct LogGamma {
    double half[kCountLimit + 2], whole[kCountLimit + 2];
};

// The table with entries 0 .. n filled (n <= kCountLimit + 1). Filled as
// far as asked for so far, not at once: the whole table, some 2000 calls
// of std::lgamma, took 40 us, 0.5% of packing posenet MXFP4, whose planes
// that take the floor (those the adaptive coder is tried on) are of at
// most 256 bytes at the default level.
const LogGamma& log_gamma(size_t n) {
    static LogGamma table;
    static std::atomic<size_t> filled{0};  // entries [0, filled) hold their values
    static std::mutex filling;
    if (filled.load(std::memory_order_acquire) <= n) {
        std::lock_guard lock(filling);
        for (size_t k = filled.load(std::memory_order_relaxed); k <= n; ++k) {
            table.half[k] = std::lgamma(static_cast<double>(k) + 0.5) / std::log(2.0);
            table.whole[k] = std::lgamma(static_cast<double>(k) + 1.0) / std::log(2.0);
        }
        if (filled.load(std::memory_order_relaxed) <= n) filled.store(n + 1, std::memory_order_release);
    }
    return table;
}

}  // namespace

double order0_floor(std::span<const uint8_t> in) {
    if (in.size() > kCountLimit) return 0;  // past it, halving makes the length depend on the order
    const LogGamma& lg = log_gamma(in.size());
    // Node m's counts: symbols below its left child (2m) and right child (2m + 1).
    std::array<uint32_t, 512> count{};
    for (uint8_t b : in) ++count[256 + b];
    for (unsigned m = 255; m >= 1; --m) count[m] = count[2 * m] + count[2 * m + 1];
    // The nodes some byte passes through, in ascending order (the order
    // the sum was always taken in): breadth first from the root, skipping
    // empty subtrees (a plane of a few hundred bytes has a few dozen such
    // nodes of 255; visiting them all was a tenth of the encoder thread's
    // time on the small tensors of esrgan per-channel FP8).
    const double log2_pi = std::log2(3.14159265358979323846);
    std::array<uint8_t, 256> queue;
    size_t head = 0, tail = 0;
    if (count[1]) queue[tail++] = 1;
    double bits = 0;
    while (head < tail) {
        const unsigned m = queue[head++];
        const uint32_t a = count[2 * m], b = count[2 * m + 1];
        // -log2 of the KT probability Gamma(a+1/2) Gamma(b+1/2) / (pi Gamma(a+b+1))
        bits += lg.whole[a + b] + log2_pi - lg.half[a] - lg.half[b];
        if (m < 128) {
            if (a) queue[tail++] = static_cast<uint8_t>(2 * m);
            if (b) queue[tail++] = static_cast<uint8_t>(2 * m + 1);
        }
    }
    // Probabilities rounded to 12 bits can undercut a bit's ideal length by
    // log2(1 + 2^-12 / p), p >= 1 / 2050: under 1% of any plane's total.
    return 0.99 * bits / 8;
}

void decode_bytes(std::span<const uint8_t> payload, std::span<uint8_t> out) {
    if (payload.empty() || payload[0] > 1) throw CorruptData("adaptive plane: bad order byte");
    const unsigned order = payload[0];
    // The trees per thread, reused: the planes this codec wins are mostly
    // a few dozen bytes (the BF16 biases' exponents of the FP8 files, 32-64
    // bytes), where allocating a fresh vector of trees per plane cost 3.5%
    // of the plane's time (1650 -> 1590 ns a 48-byte plane on Zen 3). A
    // tree is set up on its first use: an order-1 plane uses few of its 256
    // trees (512 KiB in all, kept only by threads that met such a plane),
    // where all 256 were set up for every plane. The bits themselves wait
    // on each other (load, multiply, compare): a branch-free bit (selects
    // for the range and code) took 2090 ns, and loading both children's
    // probabilities ahead of the bit 1930.
    thread_local std::vector<BitTree<8>> trees;
    if (trees.size() < (order ? 256u : 1u)) trees.resize(order ? 256 : 1);
    std::bitset<256> ready;
    Decoder d(payload.subspan(1));
    uint8_t prev = 0;
    for (auto& b : out) {
        const unsigned t = order ? prev : 0;
        if (!ready[t]) trees[t] = BitTree<8>{}, ready[t] = true;
        b = static_cast<uint8_t>(trees[t].decode(d));
        prev = b;
    }
}

std::vector<uint8_t> encode_nibbles(std::span<const uint8_t> symbols, std::span<const uint8_t> contexts,
                                    unsigned context_count) {
    std::vector<BitTree<4>> trees(context_count * 16);
    Encoder e;
    unsigned prev = 0;
    for (size_t i = 0; i < symbols.size(); ++i) {
        trees[contexts[i] * 16 + prev].encode(e, symbols[i]);
        prev = symbols[i];
    }
    return e.finish({});
}

void decode_nibbles(std::span<const uint8_t> payload, std::span<const uint8_t> contexts, unsigned context_count,
                    std::span<uint8_t> symbols) {
    std::vector<BitTree<4>> trees(context_count * 16);
    Decoder d(payload);
    unsigned prev = 0;
    for (size_t i = 0; i < symbols.size(); ++i) {
        if (contexts[i] >= context_count) throw CorruptData("adaptive nibbles: context out of range");
        prev = trees[contexts[i] * 16 + prev].decode(d);
        symbols[i] = static_cast<uint8_t>(prev);
    }
}

}  // namespace ptwm::adaptive
