// SerialWorker: one thread that runs jobs in the order they are queued. The
// store writer gives it its file I/O, so that the next batch is read and the
// last one written while the encoders work on the current one (zstd's
// command line does the same beside its -T1 compression thread).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace ptwm {

class SerialWorker {
public:
    SerialWorker() : thread_([this] { run(); }) {}
    // Jobs still queued are dropped (the caller is unwinding); a running job
    // finishes first.
    ~SerialWorker() {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
            queue_.clear();
        }
        changed_.notify_all();
        thread_.join();
    }
    SerialWorker(const SerialWorker&) = delete;
    SerialWorker& operator=(const SerialWorker&) = delete;

    // Queues `job`; returns its ticket for wait().
    uint64_t submit(std::function<void()> job) {
        std::lock_guard lock(mutex_);
        queue_.push_back(std::move(job));
        changed_.notify_all();
        return ++submitted_;
    }

    // Returns once the job of `ticket` and every job before it has run.
    // Rethrows the first error a job threw; the jobs after it are skipped
    // (a write must not follow a failed read).
    void wait(uint64_t ticket) {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return done_ >= ticket || error_; });
        if (error_) std::rethrow_exception(error_);
    }
    void wait_all() { wait(submitted()); }

private:
    uint64_t submitted() {
        std::lock_guard lock(mutex_);
        return submitted_;
    }

    void run() {
        std::unique_lock lock(mutex_);
        for (;;) {
            changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
            if (stop_) return;
            std::function<void()> job = std::move(queue_.front());
            queue_.pop_front();
            if (!error_) {
                lock.unlock();
                std::exception_ptr error;
                try {
                    job();
                } catch (...) {
                    error = std::current_exception();
                }
                lock.lock();
                if (error && !error_) error_ = error;
            }
            ++done_;
            changed_.notify_all();
        }
    }

    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<std::function<void()>> queue_;
    uint64_t submitted_ = 0, done_ = 0;
    bool stop_ = false;
    std::exception_ptr error_;
    std::thread thread_;  // last: started once the members above exist
};

}  // namespace ptwm
