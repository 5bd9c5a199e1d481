// A store's bytes from an object store: a ByteSource reading fixed blocks by
// range GET, a run of missing neighbouring blocks in one request, behind its
// recent blocks in memory (within the process's bound, BlockMemory) and the
// optional disk cache. Size and ETag
// come from HEAD at open; every GET asks for that ETag (If-Match) and checks
// the one answered, so an object replaced while open fails its reads with a
// clear error instead of mixing bytes of two versions.
//
// Fetch-ahead: once reads walk forward through the blocks, the next
// `window_blocks` are fetched in the background on the process's FetchPool
// (a few blocks a request, several requests in flight), so a sequential
// reader finds its blocks arrived or arriving. A block is fetched once: a
// read of a block in flight waits for that fetch (and its error) instead of
// asking again.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "ptwm/base/byte_source.hpp"
#include "ptwm/remote/disk_cache.hpp"
#include "ptwm/remote/fetch_pool.hpp"
#include "ptwm/remote/object_store.hpp"

namespace ptwm::remote {

struct HttpSourceOptions {
    uint32_t block_bytes = 1u << 20;     // the unit of fetching and of the disk cache
    size_t memory_blocks = 16;           // recent blocks kept in memory, besides those fetched ahead
                                         // (at most: BlockMemory may let them go first)
    // Without the network, a cached size and ETag let the object open (and
    // its cached blocks be read) all the same.
    bool allow_offline = true;
    // Unset: the store's (ObjectStore::fetch_ahead()).
    std::optional<FetchAheadOptions> fetch_ahead;
};

class HttpSource final : public ByteSource {
public:
    // HEAD now (or the cached size and ETag when the server cannot be
    // reached and the cache has them). `cache` may be null.
    static std::unique_ptr<HttpSource> open(std::shared_ptr<ObjectStore> store, const RemoteUrl& object,
                                            std::shared_ptr<DiskCache> cache, HttpSourceOptions options = {});
    ~HttpSource() override;

    const std::string& name() const override;
    uint64_t size() const override;
    const std::string& etag() const;
    // Opened from the disk cache's size and ETag: the server could not be
    // reached for its HEAD.
    bool opened_offline() const { return offline_; }
    size_t read_up_to(uint64_t offset, std::span<uint8_t> out) const override;
    // Drops the blocks of the range from memory and from the disk cache.
    bool forget(uint64_t offset, uint64_t length) const override;

private:
    // The blocks and their bookkeeping, shared with the background fetches
    // (which may finish after the source is closed).
    class Blocks;
    HttpSource(std::shared_ptr<Blocks> blocks, bool offline);
    std::shared_ptr<Blocks> blocks_;
    bool offline_ = false;
};

// Throws Error naming the object when its size is not `expected`, the
// manifest's: not the file the tree was packed with.
void require_manifest_size(const ByteSource& source, uint64_t expected);

// A plain file of a packed tree (config, tokenizer), whole and in order,
// `block_bytes` at a time: sink(offset, bytes), bytes valid during the call.
// Throws Error naming the object when its size is not `expected` (the
// manifest's), and Cancelled when the run is interrupted.
void read_whole(const HttpSource& source, uint64_t expected, size_t block_bytes,
                const std::function<void(uint64_t, std::span<const uint8_t>)>& sink);

// The disk-cache key of an object's size and ETag.
std::string object_info_key(const RemoteUrl& object);

}  // namespace ptwm::remote
