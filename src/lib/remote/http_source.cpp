#include "ptwm/remote/http_source.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace ptwm::remote {

std::string object_info_key(const RemoteUrl& object) { return "info\n" + object.text; }

std::unique_ptr<HttpSource> HttpSource::open(std::shared_ptr<ObjectStore> store, const RemoteUrl& object,
                                             std::shared_ptr<DiskCache> cache, HttpSourceOptions options) {
    ObjectInfo info;
    try {
        info = store->head(object);
        if (cache) {
            const std::string text = std::to_string(info.size) + "\n" + info.etag;
            cache->put(object_info_key(object), {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
        }
    } catch (const RemoteError& e) {
        std::optional<std::vector<uint8_t>> cached;
        if (!e.transient() || !cache || !options.allow_offline || !(cached = cache->get(object_info_key(object)))) throw;
        const std::string text(cached->begin(), cached->end());
        const auto nl = text.find('\n');
        info.size = std::stoull(text.substr(0, nl));
        info.etag = nl == std::string::npos ? "" : text.substr(nl + 1);
        std::fprintf(stderr, "ptwmfs: %s: unreachable (%s); serving it from the disk cache\n", object.text.c_str(),
                     e.what());
    }
    return std::unique_ptr<HttpSource>(new HttpSource(std::move(store), object, std::move(cache), options, info));
}

HttpSource::HttpSource(std::shared_ptr<ObjectStore> store, RemoteUrl object, std::shared_ptr<DiskCache> cache,
                       HttpSourceOptions options, ObjectInfo info)
    : store_(std::move(store)), object_(std::move(object)), cache_(std::move(cache)), options_(options),
      info_(std::move(info)) {}

std::string HttpSource::block_key(uint64_t block) const {
    // The ETag is in the key: a new version of the object never meets the old one's blocks.
    return "block\n" + object_.text + "\n" + info_.etag + "\n" + std::to_string(options_.block_bytes) + "\n" +
           std::to_string(block);
}

size_t HttpSource::read_up_to(uint64_t offset, std::span<uint8_t> out) const {
    if (offset >= info_.size || out.empty()) return 0;
    const uint64_t end = std::min<uint64_t>(info_.size, offset + out.size());
    const uint64_t bs = options_.block_bytes;
    const uint64_t first = offset / bs, last = (end - 1) / bs;
    const std::vector<Block> got = blocks(first, last);
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

void HttpSource::remember(uint64_t index, Block block) const {
    // mutex_ held
    if (memory_.emplace(index, std::move(block)).second) memory_order_.push_front(index);
    while (memory_.size() > options_.memory_blocks) {
        memory_.erase(memory_order_.back());
        memory_order_.pop_back();
    }
}

std::vector<HttpSource::Block> HttpSource::blocks(uint64_t first, uint64_t last) const {
    std::vector<Block> got(last - first + 1);
    std::vector<uint64_t> mine;  // blocks this call fetches
    {
        std::unique_lock lock(mutex_);
        for (uint64_t b = first; b <= last; ++b) {
            // Another thread fetching it: wait for that instead of fetching twice.
            fetched_.wait(lock, [&] { return !in_flight_.count(b); });
            if (const auto it = memory_.find(b); it != memory_.end()) {
                got[b - first] = it->second;
            } else {
                in_flight_[b] = true;
                mine.push_back(b);
            }
        }
    }
    auto release = [&] {
        std::lock_guard lock(mutex_);
        for (uint64_t b : mine) in_flight_.erase(b);
        fetched_.notify_all();
    };
    try {
        std::vector<uint64_t> missing;
        for (uint64_t b : mine) {
            std::optional<std::vector<uint8_t>> cached;
            if (cache_ && (cached = cache_->get(block_key(b))))
                got[b - first] = std::make_shared<const std::vector<uint8_t>>(std::move(*cached));
            else
                missing.push_back(b);
        }
        // Coalesce: each run of consecutive missing blocks is one range GET.
        for (size_t i = 0; i < missing.size();) {
            size_t j = i;
            while (j + 1 < missing.size() && missing[j + 1] == missing[j] + 1) ++j;
            fetch_run(missing[i], missing[j], got, first);
            i = j + 1;
        }
        std::lock_guard lock(mutex_);
        for (uint64_t b : mine) remember(b, got[b - first]);
    } catch (...) {
        release();
        throw;
    }
    release();
    return got;
}

void HttpSource::fetch_run(uint64_t first, uint64_t last, std::vector<Block>& into, uint64_t base) const {
    const uint64_t bs = options_.block_bytes;
    const uint64_t begin = first * bs, end = std::min(info_.size, (last + 1) * bs);
    std::vector<uint8_t> bytes(end - begin);
    HttpRequest req = store_->request("GET", object_);
    req.range = {begin, end - 1};
    req.into = bytes;
    if (!info_.etag.empty()) req.headers.push_back("If-Match: " + info_.etag);
    const HttpResponse resp = store_->client().send(req);
    if (resp.status == 412 || (resp.status < 300 && !resp.etag.empty() && !info_.etag.empty() && resp.etag != info_.etag))
        throw Error(object_.text + ": the object changed since it was opened (ETag " + info_.etag + ", now " +
                    (resp.etag.empty() ? "different" : resp.etag) + "); its reads fail rather than mix two versions");
    if (resp.status >= 300) throw RemoteError(store_->client().describe_failure(req, resp), resp.status, false);
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
        into[b - base] = std::move(block);
    }
}

}  // namespace ptwm::remote
