// The timing harness of the benchmarks: best-of-N wall and CPU time of a
// function on this thread, and of a command run as a child process. On a
// shared, noisy machine noise only ever adds time, so the least disturbed
// (fastest) repetition is the one kept.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace bench {

using Clock = std::chrono::steady_clock;
constexpr double kInf = std::numeric_limits<double>::infinity();

inline double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// CPU time of the calling thread: with one thread doing all the work it is
// the wall time minus the time other users of the machine took the core.
inline double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Keeps the minimum of repeated timings: on a shared machine noise only ever
// adds time, so the fastest repetition is the closest to the true cost.
// Single-threaded runs also keep the best CPU time (user + sys), which is
// immune to preemption when the machine is overloaded (it still pays for
// cache and memory-bandwidth contention). Every wall time is kept too, for
// the median and the range of the rounds.
struct Best {
    double seconds = kInf;
    double cpu_seconds = kInf;
    std::vector<double> samples;
    void add(double s, double cpu = kInf) {
        seconds = std::min(seconds, s);
        cpu_seconds = std::min(cpu_seconds, cpu);
        samples.push_back(s);
    }
    void clear() { *this = Best{}; }
    bool valid() const { return std::isfinite(seconds) && seconds > 0; }
    double mbps(uint64_t bytes) const { return valid() ? static_cast<double>(bytes) / 1e6 / seconds : NAN; }
    // Throughput of the median round, and of the slowest (the fastest is mbps).
    double median_mbps(uint64_t bytes) const {
        if (!valid()) return NAN;
        std::vector<double> s = samples;
        std::sort(s.begin(), s.end());
        const size_t n = s.size();
        const double median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
        return static_cast<double>(bytes) / 1e6 / median;
    }
    double slowest_mbps(uint64_t bytes) const {
        return valid() ? static_cast<double>(bytes) / 1e6 / *std::max_element(samples.begin(), samples.end()) : NAN;
    }
    double cpu_mbps(uint64_t bytes) const {
        return std::isfinite(cpu_seconds) && cpu_seconds > 0 ? static_cast<double>(bytes) / 1e6 / cpu_seconds : NAN;
    }
};

// Times fn() on this thread: wall and CPU seconds.
template <typename Fn>
void measure(Best& best, Fn&& fn) {
    const double cpu0 = thread_cpu_seconds();
    const auto start = Clock::now();
    fn();
    const double wall = seconds_since(start);
    best.add(wall, thread_cpu_seconds() - cpu0);
}

// How many times faster `ours` ran than `peer`, round by round: the median,
// slowest and fastest of peer[i] / ours[i] over the rounds both timed (their
// samples in round order, interleaved). A burst of noise that slows one
// round slows both sides of it alike, so the ratio of a round is steadier
// than either time; on the 4-10 ms runs of the command line over small files
// the best of a few rounds was not (a start-up that happened to be quick on
// one side decided it).
struct PairedRatio {
    double median = NAN, slowest = NAN, fastest = NAN;
    size_t rounds = 0;
};
inline PairedRatio paired_ratio(const Best& ours, const Best& peer) {
    PairedRatio r;
    std::vector<double> q;
    for (size_t i = 0; i < std::min(ours.samples.size(), peer.samples.size()); ++i)
        if (ours.samples[i] > 0) q.push_back(peer.samples[i] / ours.samples[i]);
    if (q.empty()) return r;
    std::sort(q.begin(), q.end());
    const size_t n = q.size();
    r.median = n % 2 ? q[n / 2] : (q[n / 2 - 1] + q[n / 2]) / 2;
    r.slowest = q.front();
    r.fastest = q.back();
    r.rounds = n;
    return r;
}

struct CommandTime {
    double wall = 0;
    double cpu = 0;  // user + sys of the child
};

// Wall and CPU time of one run of argv (stdout to /dev/null, stderr kept so
// failures show), or nullopt if it could not start or exited non-zero.
std::optional<CommandTime> time_command(const std::vector<std::string>& argv);

}  // namespace bench
