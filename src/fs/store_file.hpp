// One store as the mount serves it: maps a byte range of the original file
// onto the header prefix (kept in memory), cached decoded chunks, and raw
// chunks read straight from the store file.
//
// At mount a store is only its original size (from its superblock, or for a
// remote tree from the manifest). Its prefix, parsed header and chunk index
// (a StoreReader, LoadedStore below) are read on first use and may be
// dropped again under the mount's index cap (IndexCache).
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "ptwm/base/byte_source.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/remote/http_client.hpp"
#include "ptwm/store/chunk_cache.hpp"
#include "ptwm/store/store_reader.hpp"
#include "shared_attempt.hpp"

namespace ptwmfs {

class IndexCache;

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

// What a store holds once loaded. Readers and decode-ahead jobs keep it by
// shared_ptr while they use it, so dropping it from its store (under the
// index cap) never pulls it from under them; it is freed with the last one.
struct LoadedStore {
    std::unique_ptr<ptwm::StoreReader> reader;
    // Raw chunks' checksums are checked on their first read (gather_raw):
    // one bit a chunk.
    std::unique_ptr<std::atomic<uint64_t>[]> raw_verified;
    size_t memory_bytes = 0;  // reader and bits

    bool raw_chunk_verified(size_t i) const {
        return (raw_verified[i / 64].load(std::memory_order_relaxed) >> (i % 64)) & 1;
    }
    void set_raw_chunk_verified(size_t i) const {
        raw_verified[i / 64].fetch_or(uint64_t{1} << (i % 64), std::memory_order_relaxed);
    }
};
using LoadedStorePtr = std::shared_ptr<const LoadedStore>;

// f(), once more if it fails on what the source's bytes say (not a store,
// damaged; not a failed request) and the source keeps copies it can drop:
// a remote store's superblock, header or index as a server once sent them
// wrong, kept by the disk cache, would otherwise fail every mount and load.
template <class F>
auto reading_anew_on_failure(const ptwm::ByteSource& source, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (const ptwm::remote::RemoteError&) {
        throw;
    } catch (const ptwm::Error&) {
        if (!source.forget(0, source.size())) throw;
    }
    return f();
}

class StoreFile {
public:
    // Opens the store's bytes: called once, on first load (a remote store
    // is a HEAD and range reads, so nothing is fetched at mount).
    using SourceOpener = std::function<std::shared_ptr<const ptwm::ByteSource>()>;

    // `id` keys this store's chunks in the shared cache; `name` is the
    // store's path or URL for messages; `original_size` is what the mount
    // shows until the store is loaded (and must match it then).
    StoreFile(uint64_t id, std::string name, uint64_t original_size, SourceOpener open_source);
    // A store whose source is open already (a local one, or a remote store
    // mounted alone, whose superblock gave the size).
    StoreFile(uint64_t id, std::shared_ptr<const ptwm::ByteSource> source, uint64_t original_size);

    uint64_t id() const { return id_; }
    const std::string& name() const { return name_; }
    uint64_t size() const { return original_size_; }

    // The loaded store, loading it now if need be (concurrent first readers
    // share one attempt: its store, or its error), and telling `indexes` it
    // was used. Throws Error when the store cannot be loaded: logged once
    // an attempt, and remembered (the store is immutable) unless it was a
    // failed remote request, which the next read after it tries again.
    LoadedStorePtr load(IndexCache& indexes) const;
    // Drops the loaded store when no reader or job holds it; returns it so
    // the caller frees it outside its locks (null when kept or not loaded).
    LoadedStorePtr drop_if_unused() const;

    // Appends to `out` the original bytes [offset, offset + length), clipped
    // to the file's end. Throws CorruptData (after logging it once per chunk)
    // or Error; `out` is then incomplete and must not be sent.
    void gather(const LoadedStore& loaded, uint64_t offset, uint64_t length, ptwm::ChunkCache& cache,
                GatheredRead& out) const;

    // Decodes chunk `index` into the cache ahead of a sequential reader,
    // unless it is cached or being decoded already, or raw (read in place).
    // Never throws.
    void prefetch(const LoadedStore& loaded, size_t index, ptwm::ChunkCache& cache) const;

    // The chunks holding original bytes [begin, end) (begin < end), as a
    // half-open index range; empty when the range lies inside the prefix.
    static std::pair<size_t, size_t> chunks_covering(const LoadedStore& loaded, uint64_t begin, uint64_t end);

private:
    LoadedStorePtr loaded_now() const;
    LoadedStorePtr load_now(IndexCache& indexes) const;  // one attempt (see load)
    LoadedStorePtr open_loaded() const;
    // Raw chunks are read in place, bypassing the cache (they would only
    // duplicate the page cache). Their checksum is still checked once, on
    // first read, by decoding the whole chunk.
    void gather_raw(const LoadedStore& loaded, size_t index, uint64_t begin, uint64_t end, GatheredRead& out) const;
    // Decodes chunk `index` into `out`, reporting corruption once. With a
    // cache, a grouped chunk takes its block scales from it: each scale
    // chunk is decoded there once for all threads (by itself each thread
    // keeps only the last one it decoded, and the blocks chunks of a large
    // tensor go to every thread).
    void decode(const LoadedStore& loaded, size_t index, std::span<uint8_t> out, ptwm::ChunkCache* cache) const;
    void report_corruption(size_t index, const std::exception& e) const;

    uint64_t id_;
    std::string name_;
    uint64_t original_size_;
    SourceOpener open_source_;

    mutable SharedAttempt<LoadedStorePtr> loading_;  // first readers merge on it
    // These three are touched only by load_now, one attempt at a time.
    mutable std::shared_ptr<const ptwm::ByteSource> source_;  // opened once, kept
    mutable bool failed_ = false;    // a load failed for good: load_error_ says why
    mutable std::string load_error_;
    mutable std::mutex loaded_mutex_;  // guards loaded_ (short holds only)
    mutable LoadedStorePtr loaded_;

    // Decoding ahead has failed since it last succeeded: its failures
    // (a deleted object: one per chunk ahead) are logged once, not each.
    mutable std::atomic<bool> prefetch_failing_{false};
    mutable std::mutex reported_mutex_;
    mutable std::unordered_set<size_t> reported_;  // corrupt chunks already logged
};

}  // namespace ptwmfs
