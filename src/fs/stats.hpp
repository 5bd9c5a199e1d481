// Read statistics of the mount, and the JSON report served as the
// user.ptwmfs.stats extended attribute of the mount root and printed at exit.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "index_cache.hpp"
#include "prefetcher.hpp"
#include "ptwm/store/chunk_cache.hpp"

namespace ptwmfs {

// Latencies in log-spaced buckets: four per power of two, so a percentile
// is known to within 19% at any scale, with lock-free recording.
class LatencyHistogram {
public:
    void record(uint64_t ns);
    // The upper bound of the bucket holding quantile q (0..1); 0 when empty.
    uint64_t quantile_ns(double q) const;
    uint64_t count() const;

private:
    static constexpr unsigned kSubBuckets = 4;
    static unsigned bucket_of(uint64_t ns);
    static uint64_t upper_bound_of(unsigned bucket);
    std::array<std::atomic<uint64_t>, 64 * kSubBuckets> buckets_{};
};

struct ReadStats {
    std::atomic<uint64_t> reads{0};
    std::atomic<uint64_t> bytes{0};
    std::atomic<uint64_t> prefix_bytes{0};  // served from the header kept in memory
    std::atomic<uint64_t> raw_bytes{0};     // read in place from raw chunks
    std::atomic<uint64_t> errors{0};        // reads answered with an error (EIO)
    LatencyHistogram latency;
};

// An s3:// or https:// mount sets this once at start: its figures (requests,
// bytes fetched, retries, disk cache, fetch latency) as a JSON object, shown
// under "remote".
std::function<std::string()>& remote_stats_source();

std::string stats_json(const ptwm::ChunkCacheStats& cache, const IndexCacheStats& indexes, const ReadStats& reads,
                       const PrefetchStats& prefetch);

}  // namespace ptwmfs
