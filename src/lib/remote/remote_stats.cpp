#include "ptwm/remote/remote_stats.hpp"

#include <cmath>
#include <cstdio>

#include "ptwm/remote/block_memory.hpp"

namespace ptwm::remote {

void RemoteStats::record_latency(double seconds) {
    const double units = seconds * 1e4;  // 0.1 ms
    size_t b = units < 1 ? 0 : static_cast<size_t>(std::log2(units)) + 1;
    if (b >= kBuckets) b = kBuckets - 1;
    latency_[b].fetch_add(1, std::memory_order_relaxed);
}

double RemoteStats::latency_ms(double q) const {
    uint64_t total = 0;
    for (const auto& b : latency_) total += b.load(std::memory_order_relaxed);
    if (total == 0) return 0;
    const auto want = static_cast<uint64_t>(std::ceil(q * static_cast<double>(total)));
    uint64_t seen = 0;
    for (size_t b = 0; b < kBuckets; ++b) {
        seen += latency_[b].load(std::memory_order_relaxed);
        if (seen >= want) return 0.1 * std::ldexp(1.0, static_cast<int>(b));
    }
    return 0.1 * std::ldexp(1.0, kBuckets);
}

std::string RemoteStats::json() const {
    char buf[768];
    std::snprintf(buf, sizeof buf,
                  "{\"requests\":%llu,\"bytes_fetched\":%llu,\"bytes_sent\":%llu,\"retries\":%llu,\"failures\":%llu,"
                  "\"disk_cache_hits\":%llu,\"disk_cache_misses\":%llu,\"disk_cache_bytes\":%llu,"
                  "\"disk_cache_rejected\":%llu,\"disk_cache_evictions\":%llu,\"ahead_blocks\":%llu,\"in_flight_waits\":%llu,"
                  "\"memory_bytes\":%llu,\"memory_limit\":%llu,"
                  "\"fetch_latency_ms\":{\"p50\":%.1f,\"p90\":%.1f,\"p99\":%.1f}}",
                  static_cast<unsigned long long>(requests.load()), static_cast<unsigned long long>(bytes_fetched.load()),
                  static_cast<unsigned long long>(bytes_sent.load()), static_cast<unsigned long long>(retries.load()),
                  static_cast<unsigned long long>(failures.load()), static_cast<unsigned long long>(cache_hits.load()),
                  static_cast<unsigned long long>(cache_misses.load()), static_cast<unsigned long long>(cache_bytes.load()),
                  static_cast<unsigned long long>(cache_rejected.load()),
                  static_cast<unsigned long long>(cache_evictions.load()),
                  static_cast<unsigned long long>(ahead_blocks.load()), static_cast<unsigned long long>(in_flight_waits.load()),
                  static_cast<unsigned long long>(BlockMemory::shared().bytes()),
                  static_cast<unsigned long long>(BlockMemory::shared().limit()),
                  latency_ms(0.5), latency_ms(0.9),
                  latency_ms(0.99));
    return buf;
}

}  // namespace ptwm::remote
