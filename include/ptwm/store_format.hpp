// The on-disk layout of a store file (NAME.safetensors.ptwm). All integers
// little-endian. man/ptwmfs-store.5 describes it for independent readers;
// keep the two in step.
//
//   superblock   96 bytes at offset 0
//   prefix       the original file's header bytes, verbatim
//   chunk data   per chunk, its planes' payloads back to back
//   index        chunk_count entries of 80 bytes, sorted by original offset
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "ptwm/codec.hpp"
#include "ptwm/decomposition.hpp"

namespace ptwm {

inline constexpr std::array<uint8_t, 8> kStoreMagic = {'P', 'T', 'W', 'M', 'S', 'T', 'O', 'R'};
inline constexpr uint32_t kStoreVersion = 1;
inline constexpr size_t kSuperblockBytes = 96;
inline constexpr size_t kChunkEntryBytes = 80;
inline constexpr uint32_t kNoTensor = 0xFFFFFFFFu;

struct Superblock {
    uint32_t version = kStoreVersion;
    uint32_t flags = 0;
    uint64_t original_size = 0;    // size of the original safetensors file
    uint64_t prefix_offset = 0;    // where the verbatim header bytes are in the store
    uint64_t prefix_length = 0;    // = offset of the data section in the original
    uint64_t prefix_checksum = 0;  // XXH3-64 of the prefix bytes
    uint64_t index_offset = 0;
    uint64_t chunk_count = 0;
    uint64_t index_checksum = 0;   // XXH3-64 of the chunk_count * 80 index bytes
};

struct ChunkEntry {
    uint64_t original_offset = 0;  // in the original file
    uint64_t stored_offset = 0;    // in the store: first byte of plane 0's payload
    uint64_t checksum = 0;         // XXH3-64 of the decoded (original) bytes
    uint32_t original_length = 0;
    uint32_t tensor = kNoTensor;   // index into the header's tensors sorted by offset
    Decomposition decomposition = Decomposition::stream;
    uint8_t plane_count = 0;
    std::array<Codec, kMaxPlanes> codec{};
    std::array<uint32_t, kMaxPlanes> payload_length{};

    uint64_t stored_length() const;  // sum of payload lengths
};

void encode_superblock(const Superblock& sb, std::span<uint8_t, kSuperblockBytes> out);
// Throws Error (naming `what`) on wrong magic, unknown version or a bad checksum.
Superblock decode_superblock(std::span<const uint8_t, kSuperblockBytes> in, const std::string& what);

void encode_chunk_entry(const ChunkEntry& e, std::span<uint8_t, kChunkEntryBytes> out);
ChunkEntry decode_chunk_entry(std::span<const uint8_t, kChunkEntryBytes> in);

}  // namespace ptwm
