#include "ptwm/remote/fetch_pool.hpp"

#include <unistd.h>

#include <thread>

namespace ptwm::remote {

// Queued jobs allowed per thread: enough to keep every connection busy
// between two reads, few enough that a job is not stale when it runs.
static constexpr size_t kQueuedPerThread = 4;

FetchPool& FetchPool::shared() {
    // Leaked on purpose: a thread still inside a request when the process
    // exits must not meet a destroyed pool (or a joinable std::thread's
    // std::terminate).
    static FetchPool* pool = new FetchPool();
    return *pool;
}

bool FetchPool::try_submit(std::function<void()> job, unsigned threads) {
    if (threads == 0) return false;
    std::lock_guard lock(mutex_);
    const long pid = static_cast<long>(getpid());
    if (started_in_ != pid) {
        // A fork copied the pool but not its threads: start afresh.
        threads_ = 0;
        jobs_.clear();
        started_in_ = pid;
    }
    if (jobs_.size() >= kQueuedPerThread * threads) return false;
    for (; threads_ < threads; ++threads_) std::thread([this] { work(); }).detach();
    jobs_.push_back(std::move(job));
    wake_.notify_one();
    return true;
}

void FetchPool::work() {
    for (;;) {
        std::function<void()> job;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [this] { return !jobs_.empty(); });
            job = std::move(jobs_.front());
            jobs_.pop_front();
        }
        job();  // jobs catch their own errors
    }
}

}  // namespace ptwm::remote
