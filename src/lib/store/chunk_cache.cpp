#include "ptwm/store/chunk_cache.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <new>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace ptwm {

namespace {

// What a chunk of `length` bytes holds resident: its buffer in whole
// pages. (A multiple of the page size, so munmap and mmap agree.)
size_t mapped_bytes(size_t length) {
    static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    return (std::max<size_t>(length, 1) + page - 1) / page * page;
}

// Chunk buffers: mapped with MAP_POPULATE, so the kernel fills in a
// buffer's pages in one call instead of one page fault per 4 KiB (on a
// virtual machine those faults cost more than decoding the chunk), and
// recycled by their size in pages. A buffer takes whole pages whatever
// the chunk's length: a 100-byte chunk (a bias, a small tensor's scales)
// holds 4 KiB resident. The pool is bounded in those pages, so the
// daemon's resident memory stays within the cache bound plus this much.
class BufferPool {
public:
    static constexpr size_t kMaxBytes = 32u << 20;

    uint8_t* take(size_t size) {
        const size_t mapped = mapped_bytes(size);
        {
            std::lock_guard lock(mutex_);
            auto it = free_.find(mapped);
            if (it != free_.end() && !it->second.empty()) {
                uint8_t* buffer = it->second.back();
                it->second.pop_back();
                bytes_ -= mapped;
                return buffer;
            }
        }
        void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        return static_cast<uint8_t*>(p);
    }

    void give(uint8_t* buffer, size_t size) {
        const size_t mapped = mapped_bytes(size);
        {
            std::lock_guard lock(mutex_);
            if (bytes_ + mapped <= kMaxBytes) {
                free_[mapped].push_back(buffer);
                bytes_ += mapped;
                return;
            }
        }
        ::munmap(buffer, mapped);
    }

private:
    std::mutex mutex_;
    std::unordered_map<size_t, std::vector<uint8_t*>> free_;  // by mapped size
    size_t bytes_ = 0;                                        // mapped bytes in free_
};

BufferPool& buffer_pool() {
    static BufferPool pool;
    return pool;
}

// This thread's decode time so far, nested decodes included (see get).
thread_local uint64_t t_decode_ns = 0;

}  // namespace

ChunkData::ChunkData(size_t size) : data_(buffer_pool().take(size)), size_(size) {}

ChunkData::~ChunkData() { buffer_pool().give(data_, size_); }

size_t ChunkCache::footprint(size_t length) { return mapped_bytes(length) + kEntryBytes; }

ChunkCache::ChunkCache(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

ChunkPtr ChunkCache::get(const ChunkKey& key, size_t length, const Decoder& decode) {
    std::promise<Decoded> promise;
    {
        std::unique_lock lock(mutex_);
        auto it = entries_.find(key);
        if (it != entries_.end()) {
            Entry& entry = it->second;
            if (entry.ready) {
                ++hits_;
                lru_.splice(lru_.begin(), lru_, entry.lru_position);
                return entry.result.get().chunk;
            }
            ++merged_waits_;
            std::shared_future<Decoded> pending = entry.result;
            lock.unlock();
            const Decoded& decoded = pending.get();
            if (decoded.error) decoded.error.raise();  // a copy of what the decoder threw
            return decoded.chunk;
        }
        ++misses_;
        // Reserve the bytes now so decodes in flight count against the
        // bound too: the daemon's memory is cache plus what readers hold.
        // Counted as what the chunk holds resident, not its length: FP4
        // checkpoints have many small chunks (a tensor's scales, biases, of
        // a few hundred bytes to a few KiB). Counted by length, a full
        // 256 MiB cache of a 4.3 GB MXFP4 checkpoint's chunks held 306 MiB
        // of pages and 5 MiB of entries.
        const size_t charged = footprint(length);
        evict_for(charged);
        Entry entry;
        entry.result = promise.get_future().share();
        entry.bytes = charged;
        entries_.emplace(key, std::move(entry));
        cached_bytes_ += charged;
    }

    std::shared_ptr<ChunkData> chunk;
    try {
        // A decode may get other chunks (FP4 blocks their scale chunk): the
        // time of a decode nested in this one is counted there, not twice.
        const uint64_t nested_before = t_decode_ns;
        auto start = std::chrono::steady_clock::now();
        chunk = std::make_shared<ChunkData>(length);
        decode(chunk->writable_bytes());
        const auto elapsed = static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
        decode_ns_ += elapsed - std::min(elapsed, t_decode_ns - nested_before);
        t_decode_ns = nested_before + elapsed;
        bytes_decoded_ += length;
    } catch (...) {
        ++decode_failures_;
        {
            std::lock_guard lock(mutex_);
            auto it = entries_.find(key);
            cached_bytes_ -= it->second.bytes;
            entries_.erase(it);
        }
        promise.set_value({nullptr, SharedError::current()});
        throw;
    }

    ChunkPtr result = std::move(chunk);
    {
        std::lock_guard lock(mutex_);
        Entry& entry = entries_.at(key);
        entry.ready = true;
        lru_.push_front(key);
        entry.lru_position = lru_.begin();
        // Decodes in flight could not be evicted when their bytes were
        // reserved, so concurrent (or nested) misses may have taken the
        // cache past its bound: back within it as each is done.
        evict_for(0);
    }
    promise.set_value({result, {}});
    return result;
}

void ChunkCache::release(const ChunkKey& key) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end() || !it->second.ready) return;
    cached_bytes_ -= it->second.bytes;
    lru_.erase(it->second.lru_position);
    entries_.erase(it);
    ++released_;
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
    s.released = released_;
    return s;
}

}  // namespace ptwm
