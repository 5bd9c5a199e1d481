#include "stats.hpp"

#include <bit>
#include <nlohmann/json.hpp>

namespace ptwmfs {

unsigned LatencyHistogram::bucket_of(uint64_t ns) {
    if (ns < kSubBuckets) return static_cast<unsigned>(ns);
    const unsigned octave = static_cast<unsigned>(std::bit_width(ns)) - 1;  // >= 2
    const unsigned sub = static_cast<unsigned>(ns >> (octave - 2)) & (kSubBuckets - 1);
    return (octave - 1) * kSubBuckets + sub;
}

uint64_t LatencyHistogram::upper_bound_of(unsigned bucket) {
    if (bucket < kSubBuckets) return bucket;
    const unsigned octave = bucket / kSubBuckets + 1;
    const uint64_t sub = bucket % kSubBuckets;
    return ((kSubBuckets + sub + 1) << (octave - 2)) - 1;
}

void LatencyHistogram::record(uint64_t ns) {
    buckets_[bucket_of(ns)].fetch_add(1, std::memory_order_relaxed);
}

uint64_t LatencyHistogram::count() const {
    uint64_t n = 0;
    for (const auto& b : buckets_) n += b.load(std::memory_order_relaxed);
    return n;
}

uint64_t LatencyHistogram::quantile_ns(double q) const {
    const uint64_t total = count();
    if (total == 0) return 0;
    const auto rank = static_cast<uint64_t>(q * static_cast<double>(total - 1)) + 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < buckets_.size(); ++i) {
        seen += buckets_[i].load(std::memory_order_relaxed);
        if (seen >= rank) return upper_bound_of(i);
    }
    return upper_bound_of(static_cast<unsigned>(buckets_.size() - 1));
}

std::function<std::string()>& remote_stats_source() {
    static std::function<std::string()> source;
    return source;
}

std::string stats_json(const ptwm::ChunkCacheStats& cache, const IndexCacheStats& indexes, const ReadStats& reads,
                       const PrefetchStats& prefetch) {
    auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1e3; };
    nlohmann::ordered_json j;
    j["cache"] = {
        {"capacity_bytes", cache.capacity_bytes},
        {"cached_bytes", cache.cached_bytes},
        {"cached_chunks", cache.cached_chunks},
        {"hits", cache.hits},
        {"merged_waits", cache.merged_waits},
        {"misses", cache.misses},
        {"bytes_decoded", cache.bytes_decoded},
        {"decode_seconds", static_cast<double>(cache.decode_ns) / 1e9},
        {"decode_failures", cache.decode_failures},
        {"evictions", cache.evictions},
        {"released", cache.released},
    };
    // Stores' prefixes, parsed headers and chunk indexes (-o index_cache).
    j["index"] = {
        {"capacity_bytes", indexes.capacity_bytes},
        {"held_bytes", indexes.held_bytes},
        {"loaded_stores", indexes.loaded_stores},
        {"loads", indexes.loads},
        {"drops", indexes.drops},
        {"load_failures", indexes.load_failures},
        {"load_seconds", static_cast<double>(indexes.load_ns) / 1e9},
    };
    j["reads"] = {
        {"count", reads.reads.load()},
        {"bytes", reads.bytes.load()},
        {"prefix_bytes", reads.prefix_bytes.load()},
        {"raw_bytes", reads.raw_bytes.load()},
        {"errors", reads.errors.load()},
        {"latency_us",
         {{"p50", us(reads.latency.quantile_ns(0.50))},
          {"p90", us(reads.latency.quantile_ns(0.90))},
          {"p99", us(reads.latency.quantile_ns(0.99))}}},
    };
    j["prefetch"] = {{"queued_chunks", prefetch.queued},
                     {"dropped_chunks", prefetch.dropped},
                     {"stale_chunks", prefetch.stale}};
    if (const auto remote = remote_stats_source()) j["remote"] = nlohmann::ordered_json::parse(remote());
    return j.dump();
}

}  // namespace ptwmfs
