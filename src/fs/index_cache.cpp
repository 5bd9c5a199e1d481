#include "index_cache.hpp"

#include <malloc.h>

#include <vector>

#include "store_file.hpp"

namespace ptwmfs {

void IndexCache::added(const StoreFile& store, uint64_t bytes, uint64_t load_ns) {
    std::vector<LoadedStorePtr> dropped;  // freed after the lock is released
    {
        std::lock_guard lock(mutex_);
        ++loads_;
        load_ns_ += load_ns;
        if (auto it = where_.find(&store); it != where_.end()) {  // not expected: a store loads once until dropped
            held_ -= it->second->bytes;
            lru_.erase(it->second);
        }
        lru_.push_front({&store, bytes});
        where_[&store] = lru_.begin();
        held_ += bytes;
        // From the least recently used end; the store just loaded is in use.
        for (auto it = std::prev(lru_.end()); held_ > capacity_ && it != lru_.begin();) {
            auto victim = it--;
            if (LoadedStorePtr freed = victim->store->drop_if_unused()) {
                held_ -= victim->bytes;
                ++drops_;
                where_.erase(victim->store);
                lru_.erase(victim);
                dropped.push_back(std::move(freed));
            }
        }
    }
    if (!dropped.empty()) {
        dropped.clear();
        malloc_trim(0);  // the parsed headers' small blocks, as after a load (StoreFile::load)
    }
}

void IndexCache::touched(const StoreFile& store) {
    std::lock_guard lock(mutex_);
    auto it = where_.find(&store);
    if (it != where_.end() && it->second != lru_.begin()) lru_.splice(lru_.begin(), lru_, it->second);
}

IndexCacheStats IndexCache::stats() const {
    std::lock_guard lock(mutex_);
    return {capacity_, held_, lru_.size(), loads_, drops_, load_failures_.load(std::memory_order_relaxed), load_ns_};
}

}  // namespace ptwmfs
