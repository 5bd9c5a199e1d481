// The bound on what loaded stores hold (-o index_cache=SIZE): header
// prefixes, parsed headers and chunk indexes. Stores load on first read;
// when what they hold exceeds the capacity, the least recently used stores
// that no read or decode-ahead job is using are dropped, and load again on
// their next read. Stores in use are never dropped, so the bound can be
// exceeded by the indexes of the stores being read at that moment.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <mutex>
#include <unordered_map>

namespace ptwmfs {

class StoreFile;

struct IndexCacheStats {
    uint64_t capacity_bytes = 0;
    uint64_t held_bytes = 0;     // held by loaded stores now
    uint64_t loaded_stores = 0;  // stores loaded now
    uint64_t loads = 0;          // loads since mount (a reload counts again)
    uint64_t drops = 0;          // stores dropped under the cap
    uint64_t load_failures = 0;  // loads that failed
    uint64_t load_ns = 0;        // time spent loading
};

class IndexCache {
public:
    explicit IndexCache(uint64_t capacity) : capacity_(capacity) {}
    IndexCache(const IndexCache&) = delete;
    IndexCache& operator=(const IndexCache&) = delete;

    uint64_t capacity() const { return capacity_; }

    // `store` has just loaded, holding `bytes` (it is in use by its
    // loader): drops unused others while over capacity.
    void added(const StoreFile& store, uint64_t bytes, uint64_t load_ns);
    // `store` served a read: most recently used now.
    void touched(const StoreFile& store);
    void load_failed() { load_failures_.fetch_add(1, std::memory_order_relaxed); }

    IndexCacheStats stats() const;

private:
    struct Entry {
        const StoreFile* store;
        uint64_t bytes;
    };
    const uint64_t capacity_;
    mutable std::mutex mutex_;
    std::list<Entry> lru_;  // most recently used first
    std::unordered_map<const StoreFile*, std::list<Entry>::iterator> where_;
    uint64_t held_ = 0, loads_ = 0, drops_ = 0, load_ns_ = 0;
    std::atomic<uint64_t> load_failures_{0};
};

}  // namespace ptwmfs
