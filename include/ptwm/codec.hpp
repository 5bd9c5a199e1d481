// Plane codecs: each turns one plane (a byte span) into a payload and back.
// The encoder runs a contest per plane and keeps the smallest payload, with
// near ties going to the faster decoder.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace ptwm {

// Stored in every chunk entry of a store: values are part of the format.
enum class Codec : uint8_t {
    raw = 0,        // payload = the plane
    constant = 1,   // payload = one byte, repeated plane-length times
    zstd = 2,       // payload = one zstd frame
    rans0 = 3,      // order-0 rANS, 32 interleaved states (htscodecs rANS Nx16)
    rans1 = 4,      // order-1 rANS (context = previous byte), for scale tensors
    adaptive = 5,   // adaptive binary range coder: no table to store, for small planes
};

bool is_known(Codec c);
std::string_view name(Codec c);

struct EncodeOptions {
    int level = 3;  // ptwmfs-tool --level, 1 (fastest) .. 9 (smallest)
};

struct EncodedPlane {
    Codec codec;
    std::vector<uint8_t> payload;
};

// Encode one plane with the best codec the level allows.
EncodedPlane encode_plane(std::span<const uint8_t> plane, const EncodeOptions& opt);
// Encode with one given codec (tests, benchmarks). Throws Error if the codec
// cannot represent the plane (constant on a plane of two values).
std::vector<uint8_t> encode_with(Codec c, std::span<const uint8_t> plane, int zstd_level = 3);

// Decode `payload` into exactly out.size() bytes. Throws CorruptData (with a
// message that does not name the file: the caller adds where) when the
// payload is malformed or decodes to another length.
void decode_plane(Codec c, std::span<const uint8_t> payload, std::span<uint8_t> out);

using Histogram = std::array<uint64_t, 256>;
void add_to_histogram(std::span<const uint8_t> bytes, Histogram& h);
// Order-0 entropy in bits of the bytes counted in `h`.
double order0_bits(const Histogram& h);

// Order-0 entropy of a byte span in bits: the bound an order-0 coder can reach.
double order0_bits(std::span<const uint8_t> bytes);
// Order-0 entropy of the 4-bit nibbles of a span (both halves of each byte).
double order0_nibble_bits(std::span<const uint8_t> bytes);

}  // namespace ptwm
