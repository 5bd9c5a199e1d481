#include "ptwm/chunk_cache.hpp"

#include <chrono>
#include <exception>

namespace ptwm {

ChunkData::ChunkData(size_t size) : data_(std::make_unique_for_overwrite<uint8_t[]>(size)), size_(size) {}

ChunkCache::ChunkCache(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

ChunkPtr ChunkCache::get(const ChunkKey& key, size_t length, const Decoder& decode) {
    std::promise<ChunkPtr> promise;
    {
        std::unique_lock lock(mutex_);
        auto it = entries_.find(key);
        if (it != entries_.end()) {
            Entry& entry = it->second;
            if (entry.ready) {
                ++hits_;
                lru_.splice(lru_.begin(), lru_, entry.lru_position);
                return entry.result.get();
            }
            ++merged_waits_;
            std::shared_future<ChunkPtr> pending = entry.result;
            lock.unlock();
            return pending.get();  // rethrows the decoder's exception
        }
        ++misses_;
        // Reserve the bytes now so decodes in flight count against the
        // bound too: the daemon's memory is cache plus what readers hold.
        evict_for(length);
        Entry entry;
        entry.result = promise.get_future().share();
        entry.bytes = length;
        entries_.emplace(key, std::move(entry));
        cached_bytes_ += length;
    }

    std::shared_ptr<ChunkData> chunk;
    try {
        auto start = std::chrono::steady_clock::now();
        chunk = std::make_shared<ChunkData>(length);
        decode(chunk->writable_bytes());
        auto elapsed = std::chrono::steady_clock::now() - start;
        decode_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count();
        bytes_decoded_ += length;
    } catch (...) {
        ++decode_failures_;
        {
            std::lock_guard lock(mutex_);
            entries_.erase(key);
            cached_bytes_ -= length;
        }
        promise.set_exception(std::current_exception());
        throw;
    }

    ChunkPtr result = std::move(chunk);
    {
        std::lock_guard lock(mutex_);
        Entry& entry = entries_.at(key);
        entry.ready = true;
        lru_.push_front(key);
        entry.lru_position = lru_.begin();
    }
    promise.set_value(result);
    return result;
}

void ChunkCache::evict_for(size_t incoming) {
    while (cached_bytes_ + incoming > capacity_ && !lru_.empty()) {
        auto it = entries_.find(lru_.back());
        cached_bytes_ -= it->second.bytes;
        entries_.erase(it);
        lru_.pop_back();
        ++evictions_;
    }
}

bool ChunkCache::contains(const ChunkKey& key) const {
    std::lock_guard lock(mutex_);
    return entries_.contains(key);
}

ChunkCacheStats ChunkCache::stats() const {
    ChunkCacheStats s;
    {
        std::lock_guard lock(mutex_);
        s.cached_bytes = cached_bytes_;
        s.cached_chunks = entries_.size();
    }
    s.capacity_bytes = capacity_;
    s.hits = hits_;
    s.merged_waits = merged_waits_;
    s.misses = misses_;
    s.bytes_decoded = bytes_decoded_;
    s.decode_ns = decode_ns_;
    s.decode_failures = decode_failures_;
    s.evictions = evictions_;
    return s;
}

}  // namespace ptwm
