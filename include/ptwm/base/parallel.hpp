// parallel_for: run fn(i) for i in [0, n) on up to `threads` threads. The
// first exception thrown by any call is rethrown on the caller's thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace ptwm {

inline unsigned default_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

// The most threads a pool starts: more than any host's cores, and few
// enough that a mistyped count cannot take all of the system's threads.
inline constexpr unsigned kMaxThreads = 1024;

// What a `threads` option asks for: 0 means default_threads(); at most
// kMaxThreads.
inline unsigned thread_count(unsigned requested) {
    return std::min(requested ? requested : default_threads(), kMaxThreads);
}

template <typename Fn>
void parallel_for(size_t n, unsigned threads, Fn&& fn) {
    threads = static_cast<unsigned>(std::min<size_t>(std::max(1u, threads), n));
    if (threads <= 1) {
        for (size_t i = 0; i < n; ++i) fn(i);
        return;
    }
    std::atomic<size_t> next{0};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto work = [&] {
        for (size_t i; (i = next.fetch_add(1)) < n;) {
            try {
                fn(i);
            } catch (...) {
                std::lock_guard lock(error_mutex);
                if (!error) error = std::current_exception();
                next = n;  // stop handing out work
            }
        }
    };
    std::vector<std::thread> pool;
    try {
        for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
    } catch (const std::system_error&) {
        // The system has no thread left to give: the ones started (and
        // this one) do the work.
    }
    work();
    for (auto& t : pool) t.join();
    if (error) std::rethrow_exception(error);
}

}  // namespace ptwm
