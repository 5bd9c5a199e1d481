// WorkerPool: parallel_for on threads that outlive the call. The store
// writer and the whole-store decoder run one parallel loop a batch of
// chunks; on fresh threads each batch set up every thread_local of the
// codecs again (scratch buffers, counter tables, htscodecs' tables: its
// order-1 decoder clears 4 MiB a thread, 1.5 ms, before its first chunk).
// The pool's threads keep them from one batch to the next.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace ptwm {

class WorkerPool {
public:
    // `threads` threads run each loop: the caller's and threads - 1 workers
    // (fewer where the system cannot start that many).
    explicit WorkerPool(unsigned threads) {
        try {
            for (unsigned t = 1; t < threads; ++t) workers_.emplace_back([this] { serve(); });
        } catch (const std::system_error&) {
            // Out of threads (EAGAIN): the loops run on the ones started.
        }
    }
    ~WorkerPool() {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        start_.notify_all();
        for (auto& t : workers_) t.join();
    }
    WorkerPool(const WorkerPool&) = delete;
    WorkerPool& operator=(const WorkerPool&) = delete;

    unsigned threads() const { return static_cast<unsigned>(workers_.size()) + 1; }

    // Runs fn(i) for every i in [0, n) and returns when all calls are done.
    // The first exception thrown by a call is rethrown here; the indices not
    // yet handed out then are skipped. One loop at a time (not reentrant).
    void run(size_t n, const std::function<void(size_t)>& fn) {
        if (workers_.empty() || n <= 1) {
            for (size_t i = 0; i < n; ++i) fn(i);
            return;
        }
        {
            std::lock_guard lock(mutex_);
            fn_ = &fn;
            n_ = n;
            next_ = 0;
            error_ = nullptr;
            busy_ = workers_.size();
            ++generation_;
        }
        start_.notify_all();
        work();
        std::unique_lock lock(mutex_);
        done_.wait(lock, [&] { return busy_ == 0; });
        fn_ = nullptr;
        if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    }

private:
    // Takes indices until none are left.
    void work() {
        for (size_t i; (i = next_.fetch_add(1)) < n_;) {
            try {
                (*fn_)(i);
            } catch (...) {
                std::lock_guard lock(mutex_);
                if (!error_) error_ = std::current_exception();
                next_ = n_;  // stop handing out work
            }
        }
    }

    void serve() {
        uint64_t seen = 0;
        std::unique_lock lock(mutex_);
        for (;;) {
            start_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            lock.unlock();
            work();
            lock.lock();
            if (--busy_ == 0) done_.notify_one();
        }
    }

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable start_, done_;
    const std::function<void(size_t)>* fn_ = nullptr;  // the loop under way
    size_t n_ = 0;
    std::atomic<size_t> next_{0};
    std::exception_ptr error_;
    size_t busy_ = 0;          // workers still in the loop under way
    uint64_t generation_ = 0;  // loops started
    bool stop_ = false;
};

}  // namespace ptwm
