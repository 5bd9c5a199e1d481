// Figures of the remote read path for -o stats and user.ptwmfs.stats:
// requests, bytes, retries, disk-cache hits and fill, fetch latency, and the
// process's fetched blocks in memory (BlockMemory) against their limit.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace ptwm::remote {

class RemoteStats {
public:
    std::atomic<uint64_t> requests{0}, bytes_fetched{0}, bytes_sent{0}, retries{0}, failures{0};
    std::atomic<uint64_t> cache_hits{0}, cache_misses{0}, cache_bytes{0}, cache_rejected{0}, cache_evictions{0};
    // Blocks fetched ahead in the background; reads that found their block
    // being fetched (ahead, or by another reader) and waited for that fetch.
    std::atomic<uint64_t> ahead_blocks{0}, in_flight_waits{0};

    void record_latency(double seconds);
    // Upper bound of the bucket holding quantile q of the fetch latencies, in ms.
    double latency_ms(double q) const;
    // {"requests":..,"bytes_fetched":..,...,"latency_ms":{"p50":..,"p90":..,"p99":..}}
    std::string json() const;

private:
    // Bucket b holds latencies in [2^(b-1), 2^b) * 0.1 ms: 0.1 ms .. ~30 min.
    static constexpr size_t kBuckets = 24;
    std::array<std::atomic<uint64_t>, kBuckets> latency_{};
};

}  // namespace ptwm::remote
