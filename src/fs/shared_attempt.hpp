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
// Errors are shared as copies, not as one exception object: every waiter
// throws its own, of the same class (so callers' catch clauses see what the
// attempt threw) and with the same message.
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace ptwmfs {

// What an attempt threw, kept to be thrown again, once per waiter.
class SharedFailure {
public:
    // The exception being handled (call it in a catch block).
    static SharedFailure current();
    [[noreturn]] void raise() const;

private:
    enum class Kind { error, corrupt_data, remote_error, object_changed };
    Kind kind_ = Kind::error;
    std::string what_;
    long status_ = 0;        // remote_error: the HTTP status
    bool transient_ = false; // remote_error: the deadline passed, the server unreachable
};

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
                if (outcome->failure) outcome->failure->raise();
                return outcome->value;
            }
            outcome = running_ = std::make_shared<Outcome>();
        }
        try {
            T value = attempt();
            finish(*outcome, &value, nullptr);
            return value;
        } catch (...) {
            const SharedFailure failure = SharedFailure::current();
            finish(*outcome, nullptr, &failure);
            throw;
        }
    }

private:
    struct Outcome {
        bool done = false;
        T value{};
        std::optional<SharedFailure> failure;
    };

    void finish(Outcome& outcome, const T* value, const SharedFailure* failure) {
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
