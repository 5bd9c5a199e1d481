// The blocks of remote objects kept in memory, for the whole process: one
// LRU bounded in bytes.
//
// Each HttpSource remembers the blocks it fetched or took from the disk
// cache: the kernel asks for a 1 MiB block in 128 KiB reads, and blocks
// fetched ahead wait there for their reader. Each source had kept up to
// 32 of them for the life of the mount, so a remote tree read once held
// some 21 MiB a file (six 40 MiB files: 177 MiB, and growing with every
// file). The sources now hold their blocks weakly and this holds them
// strongly: a block evicted here is freed once no read is copying from it,
// and a source that wants it again takes it from the disk cache or fetches
// it anew.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace ptwm::remote {

class BlockMemory {
public:
    using Block = std::shared_ptr<const std::vector<uint8_t>>;

    // Every source fits its recent blocks and its fetch-ahead window; several
    // sources read at once (a loader streaming shards in parallel) need
    // room for a few, so the limit starts here and sources raise it
    // (require) to a few of theirs.
    static constexpr uint64_t kMinimumLimit = 64u << 20;

    // The process's.
    static BlockMemory& shared();
    explicit BlockMemory(uint64_t limit_bytes = kMinimumLimit) : limit_(limit_bytes) {}
    BlockMemory(const BlockMemory&) = delete;
    BlockMemory& operator=(const BlockMemory&) = delete;

    // A number no other source of the process has: what keys its blocks.
    static uint64_t new_source();

    // Raises the limit to `bytes` if it is lower.
    void require(uint64_t bytes);
    // Keeps `block` as the most recently used block of the process (already
    // kept: moved to the front), then evicts the least recently used beyond
    // the limit, though never the one just kept.
    void keep(uint64_t source, uint64_t index, Block block);
    // Stops keeping the block (a no-op if it is not kept).
    void drop(uint64_t source, uint64_t index);

    uint64_t bytes() const;
    uint64_t limit() const;

private:
    struct Key {
        uint64_t source, index;
        bool operator==(const Key&) const = default;
    };
    struct KeyHash {
        size_t operator()(const Key& k) const { return std::hash<uint64_t>()(k.source * 0x9E3779B97F4A7C15ull ^ k.index); }
    };
    struct Entry {
        Key key;
        Block block;
    };

    mutable std::mutex mutex_;
    uint64_t limit_;
    uint64_t bytes_ = 0;
    std::list<Entry> order_;  // front: most recently used
    std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> entries_;
};

}  // namespace ptwm::remote
