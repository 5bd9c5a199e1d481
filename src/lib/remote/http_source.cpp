#include "ptwm/remote/http_source.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "ptwm/base/cancellation.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/remote/block_memory.hpp"

namespace ptwm::remote {

std::string object_info_key(const RemoteUrl& object) { return "info\n" + object.text; }

namespace {
// Reads in a row that continue the last before fetch-ahead starts: a
// store's open (superblock, header, index) is not a sequential reader.
constexpr unsigned kSequentialReads = 2;
constexpr uint64_t kNone = ~uint64_t{0};
}  // namespace

class HttpSource::Blocks : public std::enable_shared_from_this<HttpSource::Blocks> {
public:
    using Block = BlockMemory::Block;
    struct Remembered {
        std::weak_ptr<const std::vector<uint8_t>> block;
        std::list<uint64_t>::iterator order;
    };

    Blocks(std::shared_ptr<ObjectStore> store, RemoteUrl object, std::shared_ptr<DiskCache> cache,
           HttpSourceOptions options, ObjectInfo info)
        : store_(std::move(store)), object_(std::move(object)), cache_(std::move(cache)), options_(options),
          ahead_(options.fetch_ahead.value_or(store_->fetch_ahead())), info_(std::move(info)),
          block_count_((info_.size + options.block_bytes - 1) / options.block_bytes) {
        // Room for two sources' recent blocks and windows: several readers
        // at once fill it with the blocks ahead of them, and evict those
        // they have passed first.
        BlockMemory::shared().require(2 * uint64_t{capacity()} * options_.block_bytes);
    }
    ~Blocks() {
        for (const auto& [index, remembered] : memory_) BlockMemory::shared().drop(id_, index);
    }

    const RemoteUrl& object() const { return object_; }
    const ObjectInfo& info() const { return info_; }
    uint32_t block_bytes() const { return options_.block_bytes; }

    // Blocks [first, last]: from memory, a fetch in flight, the disk cache,
    // or one range GET for each run of missing ones.
    std::vector<Block> get(uint64_t first, uint64_t last);
    // Drops blocks [first, last] from memory and the disk cache.
    void forget(uint64_t first, uint64_t last);

private:
    struct Run {
        uint64_t first, last;
    };
    std::string block_key(uint64_t block) const;
    std::optional<Block> from_disk_cache(uint64_t block) const;
    // One range GET for blocks [first, last] into `into[0..]`, each put in the disk cache.
    void fetch_run(uint64_t first, uint64_t last, Block* into) const;
    // Disk cache, then one range GET for each run of blocks still missing.
    void fetch_blocks(const std::vector<uint64_t>& wanted, std::vector<Block>& got) const;

    // The blocks a source remembers at most: its recent ones and its
    // fetch-ahead window.
    size_t capacity() const { return options_.memory_blocks + ahead_.window_blocks; }
    // mutex_ held for these:
    void remember(uint64_t index, Block block);
    // The block if it is remembered and still in memory (marked used), else null.
    Block recall(uint64_t index);
    bool in_memory(uint64_t index) const;
    void forget_in_memory(std::map<uint64_t, Remembered>::iterator it);
    // Follows the read pattern; for a sequential reader, the blocks to
    // fetch ahead now.
    std::optional<Run> plan_ahead(uint64_t first, uint64_t last);
    void end_fetch(const std::vector<uint64_t>& blocks);

    // Queues the blocks of `range` not at hand, a few a request.
    void submit_ahead(Run range);
    void fetch_ahead(Run run);  // on a pool thread

    std::shared_ptr<ObjectStore> store_;
    RemoteUrl object_;
    std::shared_ptr<DiskCache> cache_;
    HttpSourceOptions options_;
    FetchAheadOptions ahead_;
    ObjectInfo info_;
    uint64_t block_count_;

    std::mutex mutex_;
    std::condition_variable fetched_;
    const uint64_t id_ = BlockMemory::new_source();  // keys its blocks in BlockMemory
    // Recent blocks, held weakly: BlockMemory holds them (and may let them
    // go first, under the process's bound).
    std::map<uint64_t, Remembered> memory_;
    std::list<uint64_t> memory_order_;       // front: most recent
    std::set<uint64_t> in_flight_;           // blocks a reader or a background fetch is fetching
    // The errors of failed fetches, for the readers that waited on them.
    std::map<uint64_t, SharedError> failed_;
    uint64_t next_block_ = kNone;  // where a sequential reader goes next
    unsigned sequential_run_ = 0;
    uint64_t ahead_until_ = 0;     // fetch-ahead planned up to here
    bool ahead_failing_ = false;   // a background fetch failed: none until a read succeeds
    mutable std::atomic<bool> change_logged_{false};
};

std::string HttpSource::Blocks::block_key(uint64_t block) const {
    // The version (ETag; else size and Last-Modified) and the size are in
    // the key: a new version of the object never meets the old one's blocks,
    // also on a server that sends no ETag.
    return "block\n" + object_.text + "\n" + info_.version() + "\n" + std::to_string(info_.size) + "\n" +
           std::to_string(options_.block_bytes) + "\n" + std::to_string(block);
}

void HttpSource::Blocks::forget(uint64_t first, uint64_t last) {
    std::lock_guard lock(mutex_);
    for (uint64_t b = first; b <= last; ++b) {
        if (const auto it = memory_.find(b); it != memory_.end()) forget_in_memory(it);
        if (cache_) cache_->erase(block_key(b));
    }
}

void HttpSource::Blocks::forget_in_memory(std::map<uint64_t, Remembered>::iterator it) {
    BlockMemory::shared().drop(id_, it->first);
    memory_order_.erase(it->second.order);
    memory_.erase(it);
}

HttpSource::Blocks::Block HttpSource::Blocks::recall(uint64_t index) {
    const auto it = memory_.find(index);
    if (it == memory_.end()) return nullptr;
    Block block = it->second.block.lock();
    if (!block) {
        forget_in_memory(it);  // BlockMemory let it go
        return nullptr;
    }
    BlockMemory::shared().keep(id_, index, block);  // used now (kept again if a reader had held it)
    return block;
}

bool HttpSource::Blocks::in_memory(uint64_t index) const {
    const auto it = memory_.find(index);
    return it != memory_.end() && !it->second.block.expired();
}

std::optional<HttpSource::Blocks::Block> HttpSource::Blocks::from_disk_cache(uint64_t block) const {
    if (!cache_) return std::nullopt;
    auto cached = cache_->get(block_key(block));
    if (!cached) return std::nullopt;
    return std::make_shared<const std::vector<uint8_t>>(std::move(*cached));
}

void HttpSource::Blocks::remember(uint64_t index, Block block) {
    if (const auto it = memory_.find(index); it != memory_.end()) {
        if (!it->second.block.expired()) return;  // still in memory
        forget_in_memory(it);                     // BlockMemory let it go: kept anew below
    }
    BlockMemory::shared().keep(id_, index, block);
    memory_order_.push_front(index);
    memory_.emplace(index, Remembered{block, memory_order_.begin()});
    // Room for the window fetched ahead besides the recent blocks.
    while (memory_.size() > capacity()) forget_in_memory(memory_.find(memory_order_.back()));
}

void HttpSource::Blocks::end_fetch(const std::vector<uint64_t>& blocks) {
    for (uint64_t b : blocks) in_flight_.erase(b);
    fetched_.notify_all();
}

std::optional<HttpSource::Blocks::Run> HttpSource::Blocks::plan_ahead(uint64_t first, uint64_t last) {
    if (ahead_.window_blocks == 0 || ahead_.connections == 0) return std::nullopt;
    const uint64_t window = ahead_.window_blocks;
    // Readers of one file arrive out of order by up to about a window.
    const bool continues = next_block_ != kNone && first + window >= next_block_ && first <= next_block_ + 1;
    if (!continues) {
        sequential_run_ = 0;
        next_block_ = last + 1;
        ahead_until_ = last + 1;
        return std::nullopt;
    }
    ++sequential_run_;
    next_block_ = std::max(next_block_, last + 1);
    // What lies more than a window behind a sequential reader is served
    // (the chunk and page caches hold it decoded): leave the room to the
    // blocks ahead.
    while (!memory_.empty() && memory_.begin()->first + window < first) forget_in_memory(memory_.begin());
    if (sequential_run_ < kSequentialReads || ahead_failing_) return std::nullopt;
    const uint64_t from = std::max(ahead_until_, last + 1), to = std::min(block_count_, next_block_ + window);
    if (from >= to) return std::nullopt;
    ahead_until_ = to;
    return Run{from, to - 1};
}

void HttpSource::Blocks::submit_ahead(Run range) {
    // Blocks in the disk cache are left to the reader: fetching them here
    // would only move the same local read to another thread.
    std::vector<bool> cached(range.last - range.first + 1, false);
    if (cache_)
        for (uint64_t b = range.first; b <= range.last; ++b) cached[b - range.first] = cache_->probably_has(block_key(b));
    std::vector<Run> runs;
    {
        std::lock_guard lock(mutex_);
        for (uint64_t b = range.first; b <= range.last; ++b) {
            if (cached[b - range.first] || in_memory(b) || in_flight_.count(b)) continue;
            in_flight_.insert(b);
            failed_.erase(b);
            if (!runs.empty() && runs.back().last + 1 == b &&
                runs.back().last - runs.back().first + 1 < ahead_.request_blocks)
                runs.back().last = b;
            else
                runs.push_back({b, b});
        }
    }
    for (size_t i = 0; i < runs.size(); ++i) {
        std::weak_ptr<Blocks> weak = weak_from_this();
        const Run run = runs[i];
        const bool queued = FetchPool::shared().try_submit(
            [weak, run] {
                // A source closed meanwhile needs nothing more.
                if (auto self = weak.lock()) self->fetch_ahead(run);
            },
            ahead_.connections);
        if (queued) continue;
        // The pool is busy: these blocks are fetched when read.
        std::lock_guard lock(mutex_);
        std::vector<uint64_t> dropped;
        for (size_t j = i; j < runs.size(); ++j)
            for (uint64_t b = runs[j].first; b <= runs[j].last; ++b) dropped.push_back(b);
        ahead_until_ = std::min(ahead_until_, run.first);
        end_fetch(dropped);
        return;
    }
}

void HttpSource::Blocks::fetch_ahead(Run run) {
    std::vector<uint64_t> blocks;
    for (uint64_t b = run.first; b <= run.last; ++b) blocks.push_back(b);
    std::vector<Block> got(blocks.size());
    SharedError error;
    try {
        for (size_t i = 0; i < blocks.size();) {
            size_t j = i;
            while (j + 1 < blocks.size() && blocks[j + 1] == blocks[j] + 1) ++j;
            fetch_run(blocks[i], blocks[j], &got[i]);
            i = j + 1;
        }
    } catch (...) {
        error = SharedError::current();
    }
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < blocks.size(); ++i) {
        if (got[i]) {
            remember(blocks[i], got[i]);
            store_->client().stats().ahead_blocks.fetch_add(1, std::memory_order_relaxed);
        } else {
            failed_[blocks[i]] = error;
        }
    }
    if (error) {
        ahead_failing_ = true;
        ahead_until_ = std::min(ahead_until_, run.first);
    }
    end_fetch(blocks);
}

void HttpSource::Blocks::fetch_blocks(const std::vector<uint64_t>& wanted, std::vector<Block>& got) const {
    std::vector<size_t> missing;  // positions in `wanted`
    for (size_t i = 0; i < wanted.size(); ++i) {
        if (auto block = from_disk_cache(wanted[i]))
            got[i] = std::move(*block);
        else
            missing.push_back(i);
    }
    // Coalesce: each run of consecutive missing blocks is one range GET.
    for (size_t i = 0; i < missing.size();) {
        size_t j = i;
        while (j + 1 < missing.size() && wanted[missing[j + 1]] == wanted[missing[j]] + 1 &&
               missing[j + 1] == missing[j] + 1)
            ++j;
        fetch_run(wanted[missing[i]], wanted[missing[j]], &got[missing[i]]);
        i = j + 1;
    }
}

std::vector<HttpSource::Blocks::Block> HttpSource::Blocks::get(uint64_t first, uint64_t last) {
    std::optional<Run> ahead;
    {
        std::lock_guard lock(mutex_);
        ahead = plan_ahead(first, last);
    }
    if (ahead) submit_ahead(*ahead);

    std::vector<Block> got(last - first + 1);
    std::vector<uint64_t> mine;  // blocks this read fetches
    {
        std::unique_lock lock(mutex_);
        // A fetch in flight is waited for at most as long as one of ours
        // would be retried: a queued background fetch behind stuck ones
        // does not hold a read past remote_timeout.
        const auto patience = std::chrono::duration<double>(store_->client().policy().timeout_seconds);
        for (uint64_t b = first; b <= last; ++b) {
            if (in_flight_.count(b)) {
                store_->client().stats().in_flight_waits.fetch_add(1, std::memory_order_relaxed);
                const bool done = fetched_.wait_for(lock, patience, [&] { return !in_flight_.count(b); });
                if (!done) {
                    end_fetch(mine);
                    throw RemoteError(object_.text + ": block " + std::to_string(b) + " still not fetched after " +
                                          std::to_string(static_cast<int>(patience.count() + 0.5)) +
                                          " s (remote_timeout)",
                                      0, true);
                }
                if (const auto f = failed_.find(b); f != failed_.end() && f->second && !in_memory(b)) {
                    end_fetch(mine);
                    f->second.raise();  // the fetch this read waited for failed: its error
                }
            }
            if (Block block = recall(b)) {
                got[b - first] = std::move(block);
            } else {
                in_flight_.insert(b);
                failed_.erase(b);
                mine.push_back(b);
            }
        }
    }
    if (mine.empty()) return got;
    std::vector<Block> fetched(mine.size());
    try {
        fetch_blocks(mine, fetched);
    } catch (...) {
        // Readers waiting for these blocks take this error rather than
        // each retrying for remote_timeout after the other.
        std::lock_guard lock(mutex_);
        const SharedError error = SharedError::current();
        for (uint64_t b : mine) failed_[b] = error;
        end_fetch(mine);
        throw;
    }
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < mine.size(); ++i) {
        got[mine[i] - first] = fetched[i];
        remember(mine[i], fetched[i]);
    }
    ahead_failing_ = false;  // the store answers again
    end_fetch(mine);
    return got;
}

void HttpSource::Blocks::fetch_run(uint64_t first, uint64_t last, Block* into) const {
    const uint64_t bs = options_.block_bytes;
    const uint64_t begin = first * bs, end = std::min(info_.size, (last + 1) * bs);
    std::vector<uint8_t> bytes(end - begin);
    HttpRequest req = store_->request("GET", object_);
    req.range = {begin, end - 1};
    req.into = bytes;
    if (!info_.etag.empty()) req.headers.push_back("If-Match: " + info_.etag);
    const HttpResponse resp = store_->client().send(req);
    const bool changed = !info_.etag.empty() ? !resp.etag.empty() && resp.etag != info_.etag
                                             : !resp.last_modified.empty() && resp.last_modified != info_.last_modified;
    if (resp.status == 412 || (resp.status < 300 && changed)) {
        const std::string now = !info_.etag.empty() ? resp.etag : "modified " + resp.last_modified;
        const std::string what = object_.text + ": the object changed since it was opened (" +
                                 (info_.etag.empty() ? "" : "ETag ") + info_.version() + ", now " +
                                 (resp.status == 412 || now.empty() ? "different" : now) +
                                 "); its reads fail rather than mix two versions";
        if (!change_logged_.exchange(true)) std::fprintf(stderr, "ptwmfs: %s\n", what.c_str());  // once an object
        throw ObjectChanged(what);
    }
    if (resp.status >= 300) throw store_->client().failure(req, resp);
    if (resp.status == 200 && begin != 0)
        throw Error(object_.text + ": the server ignored the byte range " + std::to_string(begin) + "-" +
                    std::to_string(end - 1));
    if (resp.received != bytes.size())
        throw Error(object_.text + ": short read: " + std::to_string(resp.received) + " of " +
                    std::to_string(bytes.size()) + " bytes at offset " + std::to_string(begin));
    for (uint64_t b = first; b <= last; ++b) {
        const uint64_t from = b * bs - begin, to = std::min<uint64_t>(bytes.size(), from + bs);
        auto block = std::make_shared<const std::vector<uint8_t>>(bytes.begin() + from, bytes.begin() + to);
        if (cache_) cache_->put(block_key(b), *block);
        into[b - first] = std::move(block);
    }
}

std::unique_ptr<HttpSource> HttpSource::open(std::shared_ptr<ObjectStore> store, const RemoteUrl& object,
                                             std::shared_ptr<DiskCache> cache, HttpSourceOptions options) {
    ObjectInfo info;
    bool offline = false;
    try {
        info = store->head(object);
        if (cache) {
            const std::string text = std::to_string(info.size) + "\n" + info.etag + "\n" + info.last_modified;
            cache->put(object_info_key(object), {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
        }
    } catch (const RemoteError& e) {
        std::optional<std::vector<uint8_t>> cached;
        if (!e.transient() || !cache || !options.allow_offline || !(cached = cache->get(object_info_key(object)))) throw;
        // "size\nETag\nLast-Modified" (entries written before: "size\nETag").
        const std::string text(cached->begin(), cached->end());
        const auto nl = text.find('\n');
        info.size = std::stoull(text.substr(0, nl));
        const std::string rest = nl == std::string::npos ? "" : text.substr(nl + 1);
        const auto nl2 = rest.find('\n');
        info.etag = rest.substr(0, nl2);
        info.last_modified = nl2 == std::string::npos ? "" : rest.substr(nl2 + 1);
        std::fprintf(stderr, "ptwmfs: %s: unreachable (%s); serving it from the disk cache\n", object.text.c_str(),
                     e.what());
        offline = true;
    }
    return std::unique_ptr<HttpSource>(
        new HttpSource(std::make_shared<Blocks>(std::move(store), object, std::move(cache), options, std::move(info)),
                       offline));
}

HttpSource::HttpSource(std::shared_ptr<Blocks> blocks, bool offline) : blocks_(std::move(blocks)), offline_(offline) {}
HttpSource::~HttpSource() = default;

const std::string& HttpSource::name() const { return blocks_->object().text; }
uint64_t HttpSource::size() const { return blocks_->info().size; }
const std::string& HttpSource::etag() const { return blocks_->info().etag; }

void require_manifest_size(const ByteSource& source, uint64_t expected) {
    if (source.size() != expected)
        throw Error(source.name() + ": " + std::to_string(source.size()) + " bytes, the manifest says " +
                    std::to_string(expected) + " (packed again since the manifest was read?)");
}

void read_whole(const HttpSource& source, uint64_t expected, size_t block_bytes,
                const std::function<void(uint64_t, std::span<const uint8_t>)>& sink) {
    require_manifest_size(source, expected);
    std::vector<uint8_t> block(std::min<uint64_t>(expected, block_bytes));
    for (uint64_t at = 0; at < expected;) {
        throw_if_cancelled();
        const auto n = static_cast<size_t>(std::min<uint64_t>(block.size(), expected - at));
        source.read_exact(at, {block.data(), n});
        sink(at, {block.data(), n});
        at += n;
    }
}

bool HttpSource::forget(uint64_t offset, uint64_t length) const {
    const uint64_t size = blocks_->info().size;
    if (length == 0 || offset >= size) return false;
    const uint64_t bs = blocks_->block_bytes();
    blocks_->forget(offset / bs, (std::min(size, offset + length) - 1) / bs);
    return true;
}

size_t HttpSource::read_up_to(uint64_t offset, std::span<uint8_t> out) const {
    const uint64_t size = blocks_->info().size;
    if (offset >= size || out.empty()) return 0;
    const uint64_t end = std::min<uint64_t>(size, offset + out.size());
    const uint64_t bs = blocks_->block_bytes();
    const uint64_t first = offset / bs, last = (end - 1) / bs;
    const auto got = blocks_->get(first, last);
    size_t done = 0;
    for (uint64_t b = first; b <= last; ++b) {
        const auto& block = *got[b - first];
        const uint64_t block_begin = b * bs;
        const uint64_t from = std::max(offset, block_begin), to = std::min(end, block_begin + block.size());
        if (to <= from) break;
        std::memcpy(out.data() + done, block.data() + (from - block_begin), to - from);
        done += to - from;
    }
    return done;
}

}  // namespace ptwm::remote
