// One store as the mount serves it: maps a byte range of the original file
// onto the header prefix (kept in memory), cached decoded chunks, and raw
// chunks read straight from the store file.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_set>
#include <vector>

#include "ptwm/store/chunk_cache.hpp"
#include "ptwm/store/store_reader.hpp"
#include "unique_fd.hpp"

namespace ptwmfs {

// The pieces of one read reply, in order. `held` keeps cached chunks alive
// until the reply has been written, even if the cache evicts them meanwhile.
struct GatheredRead {
    std::vector<iovec> pieces;
    std::vector<ptwm::ChunkPtr> held;
    std::vector<uint8_t> scratch;  // raw chunk bytes read for this request
    size_t scratch_used = 0;
    uint64_t prefix_bytes = 0;
    uint64_t raw_bytes = 0;

    void clear();
};

class StoreFile {
public:
    // `id` keys this store's chunks in the shared cache; `raw_fd` is the store
    // file as the scan opened it (no symlinks), held open for the mount's
    // life. Raw chunks are read through the reader's byte source, which
    // applies the page-cache policy.
    StoreFile(uint64_t id, std::unique_ptr<ptwm::StoreReader> reader, UniqueFd raw_fd);

    uint64_t id() const { return id_; }
    const ptwm::StoreReader& reader() const { return *reader_; }
    uint64_t size() const { return reader_->original_size(); }

    // Appends to `out` the original bytes [offset, offset + length), clipped
    // to the file's end. Throws CorruptData (after logging it once per chunk)
    // or Error; `out` is then incomplete and must not be sent.
    void gather(uint64_t offset, uint64_t length, ptwm::ChunkCache& cache, GatheredRead& out) const;

    // Decodes chunk `index` into the cache ahead of a sequential reader,
    // unless it is cached or being decoded already, or raw (read in place).
    // Never throws.
    void prefetch(size_t index, ptwm::ChunkCache& cache) const;

    // The chunks holding original bytes [begin, end) (begin < end), as a
    // half-open index range; empty when the range lies inside the prefix.
    std::pair<size_t, size_t> chunks_covering(uint64_t begin, uint64_t end) const;

private:
    // Raw chunks are read in place, bypassing the cache (they would only
    // duplicate the page cache). Their checksum is still checked once, on
    // first read, by decoding the whole chunk.
    void gather_raw(size_t index, uint64_t begin, uint64_t end, GatheredRead& out) const;
    void decode(size_t index, std::span<uint8_t> out) const;
    void report_corruption(size_t index, const std::exception& e) const;

    uint64_t id_;
    std::unique_ptr<ptwm::StoreReader> reader_;
    UniqueFd raw_fd_;
    std::unique_ptr<std::atomic<bool>[]> raw_verified_;
    mutable std::mutex reported_mutex_;
    mutable std::unordered_set<size_t> reported_;  // corrupt chunks already logged
};

}  // namespace ptwmfs
