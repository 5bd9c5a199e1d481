// Frame-of-reference bit packing: every byte as its distance from the
// plane's smallest byte, in the fewest bits that hold the largest distance.
//
// For planes too small for any entropy coder's table or learning to pay:
// the exponent bytes of a bias of a few dozen values span a few binades,
// 3-4 bits a byte, where the adaptive coder (no table, but a dozen bytes
// of learning on such a plane) decodes at 25-40 ns a byte. Packed bits
// decode at about a nanosecond a byte, and their size follows from the
// plane's histogram, which the contest has already counted: it is the
// contest's starting point, coded only where nothing beats it.
//
// Payload: the base (the smallest byte), the width w (1..8), then byte i's
// distance in bits i*w .. i*w + w - 1 of the rest, least significant bit
// first (bit k is bit k % 8 of byte k / 8), the last byte's unused high
// bits zero.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace ptwm::bit_pack {

// The payload size for a plane of n bytes whose byte values are counted
// in `histogram`; 0 where all bytes are equal (the constant codec's case)
// or n is 0.
size_t encoded_size(const std::array<uint64_t, 256>& histogram, size_t n);

std::vector<uint8_t> encode(std::span<const uint8_t> plane);
// Throws CorruptData where the payload is not a packing of out.size() bytes.
void decode(std::span<const uint8_t> payload, std::span<uint8_t> out);

}  // namespace ptwm::bit_pack
