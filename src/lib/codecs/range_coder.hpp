// The binary range coder both adaptive coders share (adaptive_coder.cpp,
// context_coder.hpp): LZMA's, 32-bit range renormalised below 2^24, with
// carry propagation on the way out. Each caller brings its own probability
// precision and model; this is only the arithmetic and the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ptwm::range {

inline constexpr uint32_t kTop = 1u << 24;

// Where an encoder's bytes go: a vector that grows as they come, ...
struct GrowingBytes {
    std::vector<uint8_t> bytes;
    void put(uint8_t b) { bytes.push_back(b); }
    std::vector<uint8_t> take() { return std::move(bytes); }
};
// ... or a buffer its caller sized for the worst case. No capacity check a
// byte, and no call that the coder's address escapes to, so the compiler
// keeps low and range in registers through a model's loop, where a vector's
// byte stores (which may alias anything) had them stored and reloaded a
// decision (the scale model's encoder: 11% of esrgan MXFP4's pack, 3.9 MB).
struct BoundedBytes {
    uint8_t* at;
    uint8_t* const begin;
    explicit BoundedBytes(std::span<uint8_t> buffer) : at(buffer.data()), begin(buffer.data()) {}
    void put(uint8_t b) { *at++ = b; }
    std::vector<uint8_t> take() const { return {begin, at}; }
};

template <class Bytes = GrowingBytes>
class BasicEncoder {
public:
    BasicEncoder() = default;
    explicit BasicEncoder(Bytes out) : bytes_(std::move(out)) {}
    // Code bit b, whose 0 takes `bound` of the current range
    // (bound = (range() >> precision) * p0).
    void code(uint32_t bound, unsigned b) {
        if (b == 0) {
            range_ = bound;
        } else {
            low_ += bound;
            range_ -= bound;
        }
        while (range_ < kTop) {
            range_ <<= 8;
            shift_low();
        }
    }
    uint32_t range() const { return range_; }
    // Any value in [low, low + range) decodes the same: the final one may be
    // moved there (context_coder.hpp picks the one with most trailing zeros).
    uint64_t low() const { return low_; }
    void set_low(uint64_t low) { low_ = low; }
    // Flush `bytes` bytes of low and hand over everything written. The first
    // byte is always the zero placeholder of the initial cache.
    std::vector<uint8_t> finish(int bytes) {
        for (int i = 0; i < bytes; ++i) shift_low();
        return bytes_.take();
    }

private:
    // Carry propagation: a byte is held back (cache_) until it is known
    // whether a later carry will increment it.
    void shift_low() {
        if (static_cast<uint32_t>(low_) < 0xFF000000u || (low_ >> 32) != 0) {
            const auto carry = static_cast<uint8_t>(low_ >> 32);
            uint8_t temp = cache_;
            do {
                bytes_.put(static_cast<uint8_t>(temp + carry));
                temp = 0xFF;
            } while (--pending_ != 0);
            cache_ = static_cast<uint8_t>(low_ >> 24);
        }
        ++pending_;
        low_ = (low_ & 0x00FFFFFFu) << 8;
    }

    uint64_t low_ = 0;
    uint32_t range_ = 0xFFFFFFFFu;
    uint8_t cache_ = 0;
    uint64_t pending_ = 1;
    Bytes bytes_;
};
using Encoder = BasicEncoder<>;

class Decoder {
public:
    // `start_bytes`: bytes read into the code value before the first bit
    // (5 where the encoder kept its placeholder byte, 4 where it dropped it).
    Decoder(std::span<const uint8_t> in, int start_bytes) : in_(in) {
        for (int i = 0; i < start_bytes; ++i) code_ = (code_ << 8) | next();
    }
    unsigned decode(uint32_t bound) {
        unsigned b;
        if (code_ < bound) {
            range_ = bound;
            b = 0;
        } else {
            code_ -= bound;
            range_ -= bound;
            b = 1;
        }
        while (range_ < kTop) {
            range_ <<= 8;
            code_ = (code_ << 8) | next();
        }
        return b;
    }
    uint32_t range() const { return range_; }

private:
    // Past the end reads zeros: a damaged payload decodes to wrong values,
    // never reads out of bounds.
    uint32_t next() { return at_ < in_.size() ? in_[at_++] : 0; }
    std::span<const uint8_t> in_;
    size_t at_ = 0;
    uint32_t code_ = 0;
    uint32_t range_ = 0xFFFFFFFFu;
};

}  // namespace ptwm::range
