// Codec 10, fp4-tables: MXFP4 / NVFP4 blocks as they are, each block's
// nibbles coded under a static table chosen by the block's scale.
//
// A block's scale shapes its values' distribution (a block with a large
// scale holds an outlier, so its other values sit low), so the values code
// below their order-0 entropy under a model per scale group. The grouped
// decompositions (10, 11) got there by dealing the blocks into one plane per
// group and coding each plane on its own: every plane paid for its own rANS
// states and table in htscodecs' form -- 40 bytes on a 4-state plane, 130
// on a 32-state one, which on the corpus's FP4 files was as much as the
// groups saved. Here one rANS stream carries all of a chunk's groups,
// switching tables block by block, and a table of 16 nibbles costs some 8
// bytes (static_rans.hpp's compact form). The stream has 4 states, or from
// 4 KiB 32 that start from the chunk's last values (the wide layout, coded
// and decoded 32 values a round with AVX-512; the decoder holds each
// table's symbol starts in registers, not gathered from 2^prec slots), and
// from 32 KiB two such streams over halves of the blocks, which the decoder
// steps together (the split layout: twice the chains in flight).
// There is no split or merge: the decoder writes the packed bytes directly.
//
// The grouping is searched per chunk and recorded: a block's group is its
// scale context (the E8M0 scale of MX, the exponent of NV's E4M3 scale)
// minus a base, clamped to [0, groups - 1]; the encoder picks the base,
// the group count and the table precision that make the chunk smallest.
// Format: man/ptwmfs-store.5.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ptwm::fp4tables {

enum class Kind : uint8_t {
    mx = 0,  // 16-byte blocks (32 values), the context is the E8M0 scale byte
    nv = 1,  // 8-byte blocks (16 values), the context is the E4M3 scale's exponent
};

unsigned block_bytes(Kind k);

// `blocks` holds scales.size() blocks of block_bytes(kind).
std::vector<uint8_t> encode(std::span<const uint8_t> blocks, std::span<const uint8_t> scales, Kind kind);
// Throws CorruptData when the payload is malformed, does not fit
// out.size() and the scales, or does not decode to exactly out.size() bytes.
void decode(std::span<const uint8_t> payload, std::span<uint8_t> out, std::span<const uint8_t> scales);
// Tests: code and decode the wide layout without SIMD where the CPU has it,
// so the value-by-value paths other CPUs take are covered too (default:
// allowed).
void allow_simd(bool allowed);
// Tests: the AVX2 wide-stream encoder and decoder where the CPU has
// AVX-512 (false; true again: the best the CPU has).
void allow_avx512(bool allowed);
// Tests: the AVX2 decoder's table lookups, 8 (vpgatherdd) or 1 (scalar
// loads); 0: the CPU's choice (vpgatherdd on Intel, loads elsewhere).
// f8-tables' AVX2 decoder shares the setting.
void force_gather_lanes(unsigned lanes);
// Tests: with SIMD, decode the wide layout by gathers from the slot tables
// only, as for tables whose buckets hold too many symbol starts (default:
// the tables in registers where they fit).
void allow_lane_tables(bool allowed);
// Tests and fuzz seeds: the split layout (two streams, from 32 KiB of
// blocks) from this many bytes of wide blocks, with this many streams
// (2 to 4); 0 bytes: back to the default.
void split_from(size_t bytes, unsigned streams = 2);
// Tests: false writes the streams' final states in four bytes each (and
// the wide states from 2^30), as stores written before packed states,
// which readers still decode (default: packed).
void write_packed_states(bool packed);

}  // namespace ptwm::fp4tables
