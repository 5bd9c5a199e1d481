// A bytes-bounded LRU cache of decoded chunks, shared by all readers.
//
// Keys are (store, chunk index) pairs chosen by the caller; the cache knows
// nothing of stores, files or FUSE. A miss runs the caller's decode function
// once: concurrent readers of a chunk that is being decoded wait for that
// decode instead of starting their own. Chunks are handed out as
// shared_ptr<const ChunkData>, so an evicted chunk stays alive for as long as
// a reader still uses it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>

#include "ptwm/base/error.hpp"

namespace ptwm {

// The decoded bytes of one chunk. Allocated uninitialised: the decoder
// overwrites every byte, and zero-filling megabytes per miss costs time.
// Buffers of freed chunks are kept for the next ones (see BufferPool in
// chunk_cache.cpp): a fresh buffer costs a page fault per 4 KiB, which on
// a virtual machine took more time than decoding into it.
class ChunkData {
public:
    explicit ChunkData(size_t size);
    ~ChunkData();
    ChunkData(const ChunkData&) = delete;
    ChunkData& operator=(const ChunkData&) = delete;
    std::span<const uint8_t> bytes() const { return {data_, size_}; }
    std::span<uint8_t> writable_bytes() { return {data_, size_}; }
    size_t size() const { return size_; }

private:
    uint8_t* data_;
    size_t size_;
};
using ChunkPtr = std::shared_ptr<const ChunkData>;

struct ChunkKey {
    uint64_t store = 0;
    uint64_t chunk = 0;
    bool operator==(const ChunkKey&) const = default;
};

struct ChunkKeyHash {
    size_t operator()(const ChunkKey& k) const noexcept {
        // splitmix64 finaliser over both halves: store ids and chunk indices
        // are small consecutive integers, which std::hash would not spread.
        uint64_t x = k.store * 0x9E3779B97F4A7C15ull ^ k.chunk;
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
        return static_cast<size_t>(x ^ (x >> 31));
    }
};

struct ChunkCacheStats {
    uint64_t capacity_bytes = 0;
    uint64_t cached_bytes = 0;    // ready chunks plus decodes in flight, as footprint() counts them
    uint64_t cached_chunks = 0;
    uint64_t hits = 0;            // found decoded
    uint64_t merged_waits = 0;    // found being decoded: waited for that decode
    uint64_t misses = 0;          // decoded by this request
    uint64_t bytes_decoded = 0;
    uint64_t decode_ns = 0;
    uint64_t decode_failures = 0; // decodes that threw (nothing cached)
    uint64_t evictions = 0;
    uint64_t released = 0;  // dropped behind sequential readers
};

class ChunkCache {
public:
    // Fills `out` (exactly the requested length) or throws.
    using Decoder = std::function<void(std::span<uint8_t> out)>;

    explicit ChunkCache(uint64_t capacity_bytes);
    ChunkCache(const ChunkCache&) = delete;
    ChunkCache& operator=(const ChunkCache&) = delete;

    // The chunk for `key`, decoding `length` bytes with `decode` on a miss.
    // If decode throws, the exception reaches this caller, and a copy of it
    // (SharedError) every caller that waited for the same decode; nothing
    // is cached: the next request tries again.
    ChunkPtr get(const ChunkKey& key, size_t length, const Decoder& decode);

    // Whether `key` is cached or being decoded (prefetchers skip those).
    bool contains(const ChunkKey& key) const;

    // Drops `key` if it is cached (not while it is being decoded): for a
    // chunk a sequential reader has gone past, whose bytes now sit in the
    // kernel's page cache. Its buffer goes back to the pool at once instead
    // of waiting for eviction, so a long cold read keeps reusing warm memory.
    void release(const ChunkKey& key);

    ChunkCacheStats stats() const;
    uint64_t capacity() const { return capacity_; }

    // What a cached chunk of `length` bytes counts against the bound: the
    // memory it holds, its buffer in whole pages plus kEntryBytes.
    static size_t footprint(size_t length);
    // The bookkeeping of one cached chunk, rounded up: its map and LRU
    // nodes, the shared state of its future, its shared_ptr's control
    // block and ChunkData, with malloc's headers.
    static constexpr size_t kEntryBytes = 320;

private:
    // A decode's outcome: its chunk, or what it threw.
    struct Decoded {
        ChunkPtr chunk;
        SharedError error;
    };
    struct Entry {
        std::shared_future<Decoded> result;
        size_t bytes = 0;
        bool ready = false;
        std::list<ChunkKey>::iterator lru_position;  // valid when ready
    };

    // Drops least recently used ready chunks until `incoming` more bytes fit.
    // Decodes in flight are never evicted: their waiters need them (so the
    // bound holds again when they are done, each evicting with 0).
    void evict_for(size_t incoming);

    const uint64_t capacity_;
    mutable std::mutex mutex_;
    std::unordered_map<ChunkKey, Entry, ChunkKeyHash> entries_;
    std::list<ChunkKey> lru_;  // ready chunks, most recently used first
    uint64_t cached_bytes_ = 0;

    // Counters are atomics so stats() and decode accounting need no lock.
    std::atomic<uint64_t> hits_{0}, merged_waits_{0}, misses_{0}, bytes_decoded_{0},
        decode_ns_{0}, decode_failures_{0}, evictions_{0}, released_{0};
};

}  // namespace ptwm
