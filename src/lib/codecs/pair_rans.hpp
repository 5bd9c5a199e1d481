// Order-2 rANS over a small alphabet, through htscodecs' order-1 coder:
// each byte is coded as the pair (previous byte, this byte), the ranks of
// both in the plane's alphabet packed into one byte. Under order 1 the
// context of a pair is the pair before it, which holds the two bytes
// before this one; the pair's own first half is already known there, so
// the pair costs what the byte costs given the two before it.
//
// For the block scales of large models (E8M0: a few binades, some 8
// values a chunk), whose scales follow their row's level: on a
// gpt-oss-like MXFP4 tensor's 256 KiB scale chunks, order 0 codes 0.22 of
// their size, order 1 0.14, order 2 0.123 and zstd -19 0.130.
//
// Payload: k (1..16), the k byte values in increasing order, then the
// pairs' htscodecs order-1 stream as rans::encode writes it (the first
// pair is the first byte's rank alone).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace ptwm::pair_rans {

// The most distinct byte values a plane may hold: two ranks fit a byte.
inline constexpr unsigned kMaxSymbols = 16;

// nullopt where the plane holds more than kMaxSymbols distinct values.
std::optional<std::vector<uint8_t>> encode(std::span<const uint8_t> plane);
// Throws CorruptData where the payload does not decode to out.size() bytes.
void decode(std::span<const uint8_t> payload, std::span<uint8_t> out);

}  // namespace ptwm::pair_rans
