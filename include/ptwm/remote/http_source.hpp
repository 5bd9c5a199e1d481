// A store's bytes from an object store: a ByteSource reading fixed blocks by
// range GET, a run of missing neighbouring blocks in one request, behind an
// in-memory set of recent blocks and the optional disk cache. Size and ETag
// come from HEAD at open; every GET asks for that ETag (If-Match) and checks
// the one answered, so an object replaced while open fails its reads with a
// clear error instead of mixing bytes of two versions.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ptwm/base/byte_source.hpp"
#include "ptwm/remote/disk_cache.hpp"
#include "ptwm/remote/object_store.hpp"

namespace ptwm::remote {

struct HttpSourceOptions {
    uint32_t block_bytes = 1u << 20;     // the unit of fetching and of the disk cache
    size_t memory_blocks = 16;           // recent blocks kept in memory
    // Without the network, a cached size and ETag let the object open (and
    // its cached blocks be read) all the same.
    bool allow_offline = true;
};

class HttpSource final : public ByteSource {
public:
    // HEAD now (or the cached size and ETag when the server cannot be
    // reached and the cache has them). `cache` may be null.
    static std::unique_ptr<HttpSource> open(std::shared_ptr<ObjectStore> store, const RemoteUrl& object,
                                            std::shared_ptr<DiskCache> cache, HttpSourceOptions options = {});

    const std::string& name() const override { return object_.text; }
    uint64_t size() const override { return info_.size; }
    const std::string& etag() const { return info_.etag; }
    size_t read_up_to(uint64_t offset, std::span<uint8_t> out) const override;

private:
    using Block = std::shared_ptr<const std::vector<uint8_t>>;
    HttpSource(std::shared_ptr<ObjectStore> store, RemoteUrl object, std::shared_ptr<DiskCache> cache,
               HttpSourceOptions options, ObjectInfo info);
    std::string block_key(uint64_t block) const;
    // Blocks [first, last]: from memory, the disk cache, or one range GET for
    // each run of missing ones.
    std::vector<Block> blocks(uint64_t first, uint64_t last) const;
    void fetch_run(uint64_t first, uint64_t last, std::vector<Block>& into, uint64_t base) const;
    void remember(uint64_t index, Block block) const;

    std::shared_ptr<ObjectStore> store_;
    RemoteUrl object_;
    std::shared_ptr<DiskCache> cache_;
    HttpSourceOptions options_;
    ObjectInfo info_;

    mutable std::mutex mutex_;
    mutable std::condition_variable fetched_;
    mutable std::map<uint64_t, Block> memory_;       // recent blocks
    mutable std::list<uint64_t> memory_order_;       // front: most recent
    mutable std::map<uint64_t, bool> in_flight_;     // blocks some thread is fetching
};

// The disk-cache key of an object's size and ETag.
std::string object_info_key(const RemoteUrl& object);

}  // namespace ptwm::remote
