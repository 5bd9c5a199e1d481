// Plane decompositions: a bit reorder that gathers each element's exponent
// into one byte (or the high nibble), then a byte or nibble split that
// deinterleaves the elements into planes. Each has an exact inverse.
//
// Pure functions over spans: they know nothing of codecs, chunks or I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace ptwm {

// Stored in every chunk entry of a store: values are part of the format.
enum class Decomposition : uint8_t {
    stream = 0,            // one plane, the bytes as they are
    split2 = 1,            // byte k of each 2-byte element -> plane k
    split4 = 2,            // same for 4-byte elements
    split8 = 3,            // same for 8-byte elements
    bf16_exponent = 4,     // [S E8 M7] -> [E8 S M7], then split2 (plane 1 = exponent)
    f32_exponent = 5,      // [S E8 M23] -> [E8 S M23], then split4 (plane 3 = exponent)
    f8e4m3_exponent = 6,   // [S E4 M3] -> [E4 S M3], then nibble split (plane 0 = exponents)
    f8e5m2_exponent = 7,   // [S E5 M2] -> [E5 S M2], then nibble split (plane 0 = top 4 exponent bits)
    nibble_split = 8,      // high nibbles -> plane 0, low nibbles -> plane 1 (packed FP4 and the like)
    fp4_sign_magnitude = 9,  // packed E2M1 nibbles: sign bits (plane 0, 8 a byte), magnitudes (plane 1, 2 a byte)
    fp4_mx_grouped = 10,   // MXFP4 blocks of 16 bytes grouped by their E8M0 scale (see fp4_groups.hpp)
    fp4_nv_grouped = 11,   // NVFP4 blocks of 8 bytes grouped by their E4M3 scale's exponent
    fp4_mx_modelled = 12,  // MXFP4 blocks of 16 bytes as they are, one plane for the FP4 context model
                           // (codec 8), which reads the blocks' scales as its context
    fp4_mx_tabled = 13,    // MXFP4 blocks of 16 bytes as they are, one plane for fp4-tables (codec 10),
                           // which codes each block under a table its scale picks
    fp4_nv_tabled = 14,    // the same for NVFP4 blocks of 8 bytes
};
inline constexpr unsigned kMaxPlanes = 8;

bool is_known(Decomposition d);
std::string_view name(Decomposition d);

// Whether the decomposition needs the chunk's block scales (fp4_groups.hpp);
// plane_length, split and merge below are for the others.
bool is_grouped(Decomposition d);
// The one-plane decompositions that keep the blocks as they are for a codec
// that reads their scales (12-14).
bool keeps_blocks(Decomposition d);

// Bytes per element the decomposition works on: chunk lengths are multiples of it.
unsigned element_bytes(Decomposition d);
unsigned plane_count(Decomposition d);
// Length of plane `p` for `n` input bytes (n a multiple of element_bytes).
size_t plane_length(Decomposition d, size_t n, unsigned p);

// Split `in` into planes; planes[p] must hold plane_length(d, in.size(), p) bytes.
void split(Decomposition d, std::span<const uint8_t> in, std::span<uint8_t* const> planes);
// Exact inverse of split: planes[p] holds plane_length(d, out.size(), p) bytes.
void merge(Decomposition d, std::span<const uint8_t* const> planes, std::span<uint8_t> out);

}  // namespace ptwm
