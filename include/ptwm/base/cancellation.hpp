// Stopping long work on request (the tool's SIGINT, SIGTERM and SIGHUP):
// a signal handler may only set a flag, so the loops that can run long --
// a pack's or unpack's batches, an upload's parts, a request's retries and
// transfers -- look at it between steps and throw Cancelled. Their normal
// unwinding then does the cleaning up: temporary files removed, multipart
// uploads aborted, nothing half-written left under a final name.
#pragma once

#include <stdexcept>
#include <string>

namespace ptwm {

// Not an Error: the places that catch Error to report a bad file and go on
// with the next (verify, pack --on-bad copy) must not take an interrupt for
// one.
class Cancelled : public std::runtime_error {
public:
    explicit Cancelled(int signal);
    int signal() const { return signal_; }

private:
    int signal_;
};

// From a signal handler: async-signal-safe (one lock-free atomic store).
// The first signal is the one reported.
void request_cancellation(int signal) noexcept;
// The signal that asked, or 0.
int cancellation_signal() noexcept;
inline bool cancellation_requested() noexcept { return cancellation_signal() != 0; }
// Throws Cancelled once a signal asked.
void throw_if_cancelled();

}  // namespace ptwm
