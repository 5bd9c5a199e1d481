// The on-disk layout of a store file (NAME.safetensors.ptwm). All integers
// little-endian. man/ptwmfs-store.5 describes it for independent readers;
// keep the two in step.
//
//   superblock   128 bytes at offset 0
//   prefix       section: the original file's header bytes (raw or one zstd frame)
//   chunk data   per chunk, its planes' payloads back to back
//   index        section: chunk_count entries of 80 bytes, sorted by original
//                offset (raw or one zstd frame)
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ptwm/codecs/codec.hpp"
#include "ptwm/planes/decomposition.hpp"

namespace ptwm {

inline constexpr std::array<uint8_t, 8> kStoreMagic = {'P', 'T', 'W', 'M', 'S', 'T', 'O', 'R'};
inline constexpr uint32_t kStoreVersion = 1;
inline constexpr size_t kSuperblockBytes = 128;
inline constexpr size_t kChunkEntryBytes = 80;
inline constexpr uint32_t kNoTensor = 0xFFFFFFFFu;
// The largest chunk a store may hold: bounds what one damaged entry can make a reader allocate.
inline constexpr uint32_t kMaxChunkBytes = 256u << 20;

// A metadata region of the store, kept compressed when that is smaller
// (safetensors headers are JSON and shrink several times over).
struct Section {
    uint64_t offset = 0;          // in the store
    uint64_t stored_length = 0;   // bytes in the store
    uint64_t length = 0;          // bytes once decoded
    uint64_t checksum = 0;        // XXH3-64 of the decoded bytes
    Codec codec = Codec::raw;     // raw or zstd
};

struct Superblock {
    uint32_t version = kStoreVersion;
    uint32_t flags = 0;
    uint64_t original_size = 0;  // size of the original safetensors file
    uint64_t chunk_count = 0;
    Section prefix;              // decoded: original bytes [0, length) = 8-byte length + JSON header
    Section index;               // decoded: chunk_count * 80 bytes
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
    // Grouped FP4 decompositions: the tensor holding this chunk's block
    // scales, and the scale context of group 0.
    uint32_t scale_tensor = kNoTensor;
    uint8_t group_base = 0;
    std::array<uint32_t, kMaxPlanes> payload_length{};

    uint64_t stored_length() const;  // sum of payload lengths
};

// Encode a section's bytes with the smaller of raw and zstd.
std::vector<uint8_t> encode_section(std::span<const uint8_t> bytes, Section& section);
// Read back what encode_section made; throws Error naming `what` and `name`
// (such as "chunk index") when it does not decode to its length and checksum.
std::vector<uint8_t> decode_section(std::span<const uint8_t> stored, const Section& section, const std::string& what,
                                    const char* name);

void encode_superblock(const Superblock& sb, std::span<uint8_t, kSuperblockBytes> out);
// Throws Error (naming `what`) on wrong magic, unknown version or a bad checksum.
Superblock decode_superblock(std::span<const uint8_t, kSuperblockBytes> in, const std::string& what);

void encode_chunk_entry(const ChunkEntry& e, std::span<uint8_t, kChunkEntryBytes> out);
ChunkEntry decode_chunk_entry(std::span<const uint8_t, kChunkEntryBytes> in);

}  // namespace ptwm
