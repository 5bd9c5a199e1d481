// One attempt at a time at something that can fail (loading a store's
// index, opening a remote file), whose outcome every caller that waited for
// it shares.
//
// A file's first readers had queued on a lock held through the attempt, and
// each made an attempt of its own once it had the lock. During an outage an
// attempt takes remote_timeout (60 s by default) before it fails, so the
// eighth of eight readers waited eight of them for its EIO. Now a caller
// that arrives while an attempt runs waits for that one and takes its
// value, or throws a copy of its error; the first call after it is done
// makes a new attempt (a failed request is tried again by the next read).
//
// Errors are shared as copies (ptwm::SharedError): every waiter throws
// its own, of the class the attempt threw, so callers' catch clauses see
// what it threw.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>

#include "ptwm/base/error.hpp"

namespace ptwmfs {

template <class T>
class SharedAttempt {
public:
    // attempt()'s value or error, or, if an attempt is running, that one's.
    template <class F>
    T run(F&& attempt) {
        std::shared_ptr<Outcome> outcome;
        {
            std::unique_lock lock(mutex_);
            if (running_) {
                outcome = running_;
                done_.wait(lock, [&] { return outcome->done; });
                if (outcome->failure) outcome->failure.raise();
                return outcome->value;
            }
            outcome = running_ = std::make_shared<Outcome>();
        }
        try {
            T value = attempt();
            finish(*outcome, &value, nullptr);
            return value;
        } catch (...) {
            const ptwm::SharedError failure = ptwm::SharedError::current();
            finish(*outcome, nullptr, &failure);
            throw;
        }
    }

private:
    struct Outcome {
        bool done = false;
        T value{};
        ptwm::SharedError failure;
    };

    void finish(Outcome& outcome, const T* value, const ptwm::SharedError* failure) {
        {
            std::lock_guard lock(mutex_);
            if (value) outcome.value = *value;
            if (failure) outcome.failure = *failure;
            outcome.done = true;
            running_.reset();
        }
        done_.notify_all();
    }

    std::mutex mutex_;
    std::condition_variable done_;
    std::shared_ptr<Outcome> running_;  // the attempt under way, or null
};

}  // namespace ptwmfs
