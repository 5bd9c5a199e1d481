// FP4 microscaling (MXFP4, NVFP4): the value nibbles are close to uniform on
// their own, but their distribution depends on the block's scale (a block
// with a large scale holds an outlier, so its other values sit low). The
// grouped decompositions therefore deal each block's nibbles, one per byte,
// into the plane of its scale's group, so that each plane is coded with a
// model of its own. The scales come from the paired scale tensor, which the
// store records per chunk; the scales themselves are coded as a plain stream.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "ptwm/planes/decomposition.hpp"

namespace ptwm {

// The part of a block's scale that shapes its values' distribution: MX
// scales are E8M0 exponents already; of an NV scale (E4M3), its exponent.
// Part of the store format (decompositions 10, 11; codec 10).
inline uint8_t scale_context(bool nv, uint8_t scale) { return nv ? static_cast<uint8_t>((scale >> 3) & 0x0F) : scale; }

// Bytes of packed values per scale: 16 for MXFP4 (32 values), 8 for NVFP4 (16).
unsigned block_bytes(Decomposition grouped);

// The group base: the smallest scale context in the chunk. Groups are
// context - base, the last one taking everything above.
uint8_t group_base(Decomposition grouped, std::span<const uint8_t> scales);
// Plane lengths (one nibble a byte) for blocks with these scales.
std::array<size_t, kMaxPlanes> group_plane_lengths(Decomposition grouped, std::span<const uint8_t> scales, uint8_t base);

// Histogram of the packed bytes of each group's blocks (per_group[g] for the
// blocks split_grouped deals into plane g): a group plane's nibble
// histogram, counted without splitting.
void add_group_byte_histograms(Decomposition grouped, std::span<const uint8_t> in, std::span<const uint8_t> scales,
                               uint8_t base, std::span<std::array<uint64_t, 256>, kMaxPlanes> per_group);

// `in` holds scales.size() blocks; planes[g] holds group_plane_lengths()[g] bytes.
void split_grouped(Decomposition grouped, std::span<const uint8_t> in, std::span<const uint8_t> scales, uint8_t base,
                   std::span<uint8_t* const> planes);
void merge_grouped(Decomposition grouped, std::span<const uint8_t* const> planes, std::span<const uint8_t> scales,
                   uint8_t base, std::span<uint8_t> out);

}  // namespace ptwm
