#include "ptwm/remote/block_memory.hpp"

#include <atomic>

namespace ptwm::remote {

BlockMemory& BlockMemory::shared() {
    // Leaked on purpose, as FetchPool is: its detached threads outlive main,
    // and a fetch-ahead that ends during exit() remembers its blocks (or,
    // holding a source last, drops them) here; a function-local static was
    // destroyed under them.
    static BlockMemory* memory = new BlockMemory();
    return *memory;
}

uint64_t BlockMemory::new_source() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

void BlockMemory::require(uint64_t bytes) {
    std::lock_guard lock(mutex_);
    if (bytes > limit_) limit_ = bytes;
}

void BlockMemory::keep(uint64_t source, uint64_t index, Block block) {
    std::vector<Block> evicted;  // freed after the lock is released
    std::lock_guard lock(mutex_);
    const Key key{source, index};
    if (const auto it = entries_.find(key); it != entries_.end()) {
        order_.splice(order_.begin(), order_, it->second);
        return;
    }
    bytes_ += block->size();
    order_.push_front({key, std::move(block)});
    entries_.emplace(key, order_.begin());
    while (bytes_ > limit_ && order_.size() > 1) {
        Entry& last = order_.back();
        bytes_ -= last.block->size();
        entries_.erase(last.key);
        evicted.push_back(std::move(last.block));
        order_.pop_back();
    }
}

void BlockMemory::drop(uint64_t source, uint64_t index) {
    Block dropped;  // freed after the lock is released
    std::lock_guard lock(mutex_);
    const auto it = entries_.find({source, index});
    if (it == entries_.end()) return;
    bytes_ -= it->second->block->size();
    dropped = std::move(it->second->block);
    order_.erase(it->second);
    entries_.erase(it);
}

uint64_t BlockMemory::bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
}

uint64_t BlockMemory::limit() const {
    std::lock_guard lock(mutex_);
    return limit_;
}

}  // namespace ptwm::remote
