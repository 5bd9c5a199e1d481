// A local disk cache of remote bytes (compressed extents of stores, their
// objects' size and ETag, the manifest), bounded in bytes with the least
// recently used entries evicted first. It survives restarts, and two mounts
// may share one directory: every entry is written to a temporary and renamed
// whole, and every entry carries its key and a checksum that a read checks,
// so a torn or damaged file is dropped and fetched again, never served.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ptwm/remote/remote_stats.hpp"

namespace ptwm::remote {

struct DiskCacheOptions {
    std::string dir;                       // created if missing
    uint64_t max_bytes = 4ull << 30;       // entries beyond this are evicted, oldest use first
};

// $XDG_CACHE_HOME/ptwmfs (or ~/.cache/ptwmfs): the default directory.
std::string default_disk_cache_dir();

class DiskCache {
public:
    // Throws Error when the directory cannot be made.
    DiskCache(DiskCacheOptions options, std::shared_ptr<RemoteStats> stats);

    // The bytes stored under `key`, checked; nullopt when absent or damaged
    // (a damaged entry is removed).
    std::optional<std::vector<uint8_t>> get(const std::string& key);
    // An entry file for `key` exists (unchecked, not read): fetch-ahead
    // leaves such blocks to get(), which checks them.
    bool probably_has(const std::string& key) const;
    // Stores `bytes` under `key` (atomically; failures to write are ignored:
    // a cache that cannot write only costs fetches).
    void put(const std::string& key, std::span<const uint8_t> bytes);
    // Drops the entry of `key`, if any: bytes found wrong after they were
    // cached (a server that sent wrong ones), to be fetched again.
    void erase(const std::string& key);
    // The file an entry of `key` lives in (tests damage it).
    std::string path_of(const std::string& key) const;
    const DiskCacheOptions& options() const { return options_; }

private:
    void evict_if_full();
    void release(uint64_t bytes);
    DiskCacheOptions options_;
    std::shared_ptr<RemoteStats> stats_;
    std::atomic<uint64_t> used_{0};  // this process's view; rescanned on eviction
};

}  // namespace ptwm::remote
