// A store's chunk index: what its entries must promise (check_chunk_index,
// which the reader runs on open and the writer on what it wrote), and how
// the reader keeps it in memory (ChunkIndex).
//
// ChunkIndex keeps the fields of every ChunkEntry in a structure of arrays
// of about 30 bytes a chunk for two-plane BF16 chunks, where a
// std::vector<ChunkEntry> takes 88. A 500 GB model in 256 KiB chunks has
// two million of them.
//
// What is kept per chunk: its checksum (8 bytes), original length (4),
// tensor (4), the id of its coding (4: decomposition, plane codecs, scale
// tensor and group base, shared by the chunks that agree on them) and each
// plane's payload length (4 a plane). Original and stored offsets are not
// kept: they are prefix sums of the lengths, with the sums stored at every
// kBlock-th chunk so that finding a chunk stays O(log n) (a binary search
// over blocks, then at most kBlock - 1 additions). Stored offsets follow
// the payloads back to back as the writer lays them out; the gaps a store
// may have between chunks are kept only when it has any.
//
// The on-disk index (80 bytes an entry, store_format.hpp) is unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ptwm/store/safetensors.hpp"
#include "ptwm/store/store_format.hpp"

namespace ptwm {

// Everything a store's chunk index promises that can be checked without
// decoding a payload: each entry against the header (decomposition, codecs,
// extent inside its tensor, a scale tensor that pairs), the chunks tiling
// the data section in order, payloads in order between the header section
// and the index, no grouped chunk whose scale tensor is grouped itself.
// `index` holds sb.chunk_count encoded entries; `each` gets every entry
// once it is checked. Throws Error, its message starting with `what`.
// StoreReader::open runs it on every store; the writer on what it wrote,
// before the store takes its name.
void check_chunk_index(std::span<const uint8_t> index, const Superblock& sb, const SafetensorsHeader& header,
                       const std::string& what, const std::function<void(const ChunkEntry&)>& each = {});

class ChunkIndex {
public:
    // Chunks a block spans: prefix sums are stored once a block.
    static constexpr size_t kBlock = 16;

    ChunkIndex() = default;

    // Building: entries in order of original offset, each beginning where
    // the previous one ended (the reader validates that before appending).
    void reserve(size_t chunks);
    void push_back(const ChunkEntry& e);
    // Frees what building needed and trims the arrays to their size.
    void finish();

    size_t size() const { return original_length_.size(); }
    bool empty() const { return original_length_.empty(); }

    // Entry i in full, as decode_chunk_entry gave it.
    ChunkEntry entry(size_t i) const;
    uint64_t original_offset(size_t i) const;
    uint32_t original_length(size_t i) const { return original_length_[i]; }
    uint32_t tensor(size_t i) const { return tensor_[i]; }
    Decomposition decomposition(size_t i) const { return codings_[coding_[i]].decomposition; }
    // One raw plane: the chunk's bytes are stored as they are.
    bool is_raw(size_t i) const;

    // The chunk holding original byte `offset`, for offset at or past the
    // first chunk's original offset (and before the last one's end).
    size_t find(uint64_t offset) const;

    // Bytes the index holds on the heap.
    size_t memory_bytes() const;

private:
    // What chunks share: how they were coded.
    struct Coding {
        Decomposition decomposition = Decomposition::stream;
        uint8_t plane_count = 0;
        uint8_t group_base = 0;
        std::array<Codec, kMaxPlanes> codec{};
        uint32_t scale_tensor = kNoTensor;
        bool operator==(const Coding&) const = default;
    };
    struct CodingHash {
        size_t operator()(const Coding& c) const;
    };
    uint32_t coding_id(const Coding& c);
    uint64_t stored_length(size_t i, uint64_t payload_at) const;
    uint64_t gap(size_t i) const { return gap_.empty() ? 0 : gap_[i]; }

    std::vector<uint64_t> checksum_;
    std::vector<uint32_t> original_length_;
    std::vector<uint32_t> tensor_;
    std::vector<uint32_t> coding_;
    std::vector<uint32_t> payload_length_;  // plane_count entries a chunk, back to back
    // Per block: the first chunk's original offset, stored offset, and the
    // index of its plane 0 in payload_length_.
    std::vector<uint64_t> block_original_offset_;
    std::vector<uint64_t> block_stored_offset_;
    std::vector<uint64_t> block_payload_at_;
    // stored_offset(i) - end of chunk i-1's payloads; empty while all are 0.
    std::vector<uint64_t> gap_;
    std::vector<Coding> codings_;

    // While building.
    std::unordered_map<Coding, uint32_t, CodingHash> coding_ids_;
    uint64_t next_original_offset_ = 0, next_stored_offset_ = 0;
};

}  // namespace ptwm
