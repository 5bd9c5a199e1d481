// Reading a store: open and validate it, map original offsets to chunks,
// decode one chunk. Thread-safe after open: every read is a pread.
//
// An open reader holds the store's header prefix (the original bytes), a
// compact table of its tensors (TensorTable, about 30 bytes a tensor) and
// its chunk index (ChunkIndex, about 30 bytes a chunk): memory_bytes() says
// how much. The full parsed header is made only when header() asks for it. The mount opens readers on first read and drops them under a cap;
// read_superblock is what it checks at mount.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "ptwm/base/byte_source.hpp"
#include "ptwm/store/chunk_cache.hpp"
#include "ptwm/store/chunk_index.hpp"
#include "ptwm/store/safetensors.hpp"
#include "ptwm/store/store_format.hpp"
#include "ptwm/store/tensor_table.hpp"

namespace ptwm {

class StoreReader {
public:
    // Opens and validates superblock, prefix and index (checksums, extents
    // inside the file, chunks tiling the data section). Throws Error naming
    // the file and what is wrong.
    static std::unique_ptr<StoreReader> open(const std::string& path);
    // The same over any byte source (a local file, an object store).
    static std::unique_ptr<StoreReader> open(std::unique_ptr<ByteSource> source);
    // The same over a source others share (the mount keeps one per store
    // and opens readers over it again after dropping them).
    static std::unique_ptr<StoreReader> open_shared(std::shared_ptr<const ByteSource> source);
    // Reads and validates only the superblock (magic, version, checksum,
    // sections and counts within the source's size): what a store must pass
    // to be shown as one. Throws Error as open does.
    static Superblock read_superblock(const ByteSource& source);
    ~StoreReader();
    StoreReader(const StoreReader&) = delete;
    StoreReader& operator=(const StoreReader&) = delete;

    const std::string& path() const { return path_; }
    uint64_t original_size() const { return sb_.original_size; }
    uint64_t stored_size() const { return file_size_; }
    const ByteSource& source() const { return *source_; }
    const Superblock& superblock() const { return sb_; }
    // The original file's header bytes: original bytes [0, prefix().size()).
    std::span<const uint8_t> prefix() const { return prefix_; }
    // The parsed header (names, metadata), parsed from the prefix on the
    // first call and kept: tools use it, the mount does not. Its prefix is
    // the bytes prefix() gives, not a copy.
    const SafetensorsHeader& header() const;
    const TensorTable& tensors() const { return tensors_; }

    size_t chunk_count() const { return chunks_.size(); }
    // Entry i, rebuilt from the compact index (a few dozen additions).
    ChunkEntry chunk(size_t i) const { return chunks_.entry(i); }
    const ChunkIndex& index() const { return chunks_; }
    // The chunk holding original byte `offset` (prefix().size() <= offset <
    // original_size()); binary search, O(log n).
    size_t find_chunk(uint64_t offset) const;

    // Where a grouped chunk's block scales come from: scale chunk j of this
    // store, decoded. A mount hands its chunk cache here, so that the
    // threads decoding a large tensor's blocks share one decoding of each
    // scale chunk (a 256 KiB scale chunk serves 8-16 chunks of blocks).
    using ScaleChunkFetch = std::function<ChunkPtr(size_t j)>;

    // Decode chunk i into out (out.size() == chunk(i).original_length) and
    // check its checksum. Throws CorruptData naming the file, chunk, tensor
    // and original offset; Error on an I/O failure. Without `scales`, each
    // thread keeps the scale chunk it decoded last for the grouped chunks
    // after it (and for a read of that chunk itself).
    void decode_chunk(size_t i, std::span<uint8_t> out, const ScaleChunkFetch& scales = {}) const;
    // Frees the buffers this thread's decodes reuse from chunk to chunk (the
    // stored bytes, the planes, the scales: each as large as the largest
    // chunk it has decoded) where they hold more than `keep_bytes`. For a
    // process with many decoding threads: else each keeps some twice the
    // largest chunk it ever decoded for as long as it lives.
    static void release_thread_buffers(size_t keep_bytes);
    // The block scales a grouped chunk decodes with (empty for other chunks).
    std::vector<uint8_t> chunk_scales(size_t i) const;
    // The tensor layout chunk i decodes with (decode_chunk_payload).
    TensorLayout chunk_layout(size_t i) const;
    // Whether chunk i is one raw plane: its bytes can be pread as they are.
    bool chunk_is_raw(size_t i) const;

    // Original bytes [offset, offset + out.size()) decoded without any cache
    // (unpack, verify, tests). Throws as decode_chunk.
    void read(uint64_t offset, std::span<uint8_t> out) const;

    // Heap bytes this reader holds: prefix, parsed header, index.
    size_t memory_bytes() const;

    // "file F, chunk I (tensor T, original offset O)" for messages.
    std::string describe_chunk(size_t i) const;

private:
    StoreReader() = default;
    // The block scales of grouped chunk i, decoded from its scale tensor.
    void read_scales(size_t i, std::vector<uint8_t>& scales, const ScaleChunkFetch& fetch) const;
    uint64_t serial_ = 0;  // this reader's number, unique in the process (read_scales' memo)
    std::string path_;
    std::shared_ptr<const ByteSource> source_;
    uint64_t file_size_ = 0;
    Superblock sb_;
    // The original header bytes. Spans from prefix() outlive any call (the
    // mount replies from them), so the bytes never move: prefix_bytes_ holds
    // them until header() parses, then the header's prefix does -- the same
    // buffer, moved, not a second copy.
    std::span<const uint8_t> prefix_;
    mutable std::vector<uint8_t> prefix_bytes_;
    TensorTable tensors_;
    // header(): parsed under the mutex, published through the atomic. Not
    // std::call_once: with libstdc++ a call_once whose function threw
    // leaves the next call waiting forever (GCC bug 66146), and a parse may
    // throw (bad_alloc on a large header).
    mutable std::mutex header_mutex_;
    mutable std::unique_ptr<SafetensorsHeader> header_;
    mutable std::atomic<const SafetensorsHeader*> header_ready_{nullptr};
    ChunkIndex chunks_;
};

}  // namespace ptwm
