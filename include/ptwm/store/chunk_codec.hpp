// One chunk through the plane pipeline: bytes -> planes -> coded payloads on
// the way in, and back on the way out. Knows no files.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ptwm/codecs/codec.hpp"
#include "ptwm/planes/decomposition.hpp"
#include "ptwm/store/safetensors.hpp"
#include "ptwm/store/store_format.hpp"

namespace ptwm {

struct EncodedChunk {
    ChunkEntry entry;              // everything but the offsets and the tensor
    std::vector<uint8_t> payload;  // the planes' payloads back to back
};

// `bytes.size()` must be a multiple of element_bytes(d). Grouped FP4
// decompositions take the chunk's block scales (one per block_bytes(d)).
// `layout` (with its dtype) lets the context models be tried.
EncodedChunk encode_chunk(std::span<const uint8_t> bytes, Decomposition d, const EncodeOptions& opt,
                          std::span<const uint8_t> scales = {}, const TensorLayout& layout = {});

// Decode a chunk's payload into `out` (entry.original_length bytes) and check
// the entry's checksum. Throws CorruptData saying what failed. `layout`: the
// one the chunk was encoded with (the context models need it).
void decode_chunk_payload(const ChunkEntry& entry, std::span<const uint8_t> payload, std::span<uint8_t> out,
                          std::span<const uint8_t> scales = {}, const TensorLayout& layout = {});

// Frees this thread's plane buffers (decode_chunk_payload's, reused from
// chunk to chunk) that hold more than `keep_bytes`.
void release_plane_buffers(size_t keep_bytes);

// The layout of the chunk at file offset `chunk_offset` (absolute, as
// TensorInfo::begin) of tensor `t`.
TensorLayout tensor_layout(const TensorInfo& t, uint64_t chunk_offset, bool block_scales = false);

// The candidates choose_decomposition can pick: beside the whole bytes
// (stream) a nibble split never has the smaller order-0 sum, so it goes.
// Where one is left, no sample need be read.
std::vector<Decomposition> viable_candidates(std::span<const Decomposition> candidates);

// The decomposition among `candidates` whose planes have the smallest summed
// order-0 bound on `sample` (a prefix of the tensor's bytes). (FP4 tensors
// with block scales are not chosen for: they take fp4-tables.)
Decomposition choose_decomposition(std::span<const Decomposition> candidates, std::span<const uint8_t> sample);

// The planes a chunk's original bytes split into under the entry's
// decomposition, as fresh buffers (inspection and entropy bounds).
std::vector<std::vector<uint8_t>> chunk_planes(const ChunkEntry& entry, std::span<const uint8_t> bytes,
                                               std::span<const uint8_t> scales = {});

uint64_t chunk_checksum(std::span<const uint8_t> bytes);

}  // namespace ptwm
