// Background range GETs for fetch-ahead: one process-wide set of threads,
// each doing one request at a time on a kept-alive connection (HttpClient's
// handle pool), fed from a bounded queue. The bounds are the point: however
// many files are read at once, at most `connections` background requests
// are in flight and at most a few per thread wait in the queue; a source
// that finds the queue full simply fetches later, in the foreground.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

namespace ptwm::remote {

// How far ahead of a sequential reader an HttpSource fetches, and on how
// many connections (a mount's -o fetch_ahead=, fetch_connections=).
struct FetchAheadOptions {
    uint32_t window_blocks = 16;  // blocks fetched ahead of a sequential reader; 0: no fetch-ahead
    uint32_t request_blocks = 2;  // blocks in one background range GET
    unsigned connections = 8;     // background requests in flight at once, in the whole process
};

class FetchPool {
public:
    // The process's pool. Its threads start on the first submit (after a
    // daemon's fork, never before) and live until the process ends.
    static FetchPool& shared();

    // Queues `job` to run on one of `threads` threads (the pool grows to
    // the largest number asked for). False when the queue is full: the
    // caller fetches that part itself when it needs it.
    bool try_submit(std::function<void()> job, unsigned threads);

    FetchPool() = default;
    FetchPool(const FetchPool&) = delete;
    FetchPool& operator=(const FetchPool&) = delete;

private:
    void work();

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::function<void()>> jobs_;
    unsigned threads_ = 0;  // started (detached: they live as long as the process)
    long started_in_ = 0;   // the pid that started them
};

}  // namespace ptwm::remote
