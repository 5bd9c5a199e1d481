#include "ptwm/base/cancellation.hpp"

#include <atomic>
#include <csignal>
#include <cstring>

namespace ptwm {
namespace {

std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler may only touch lock-free atomics");

std::string describe(int signal) {
    const char* name = sigabbrev_np(signal);
    return std::string("interrupted by ") + (name ? std::string("SIG") + name : "signal " + std::to_string(signal));
}

}  // namespace

Cancelled::Cancelled(int signal) : std::runtime_error(describe(signal)), signal_(signal) {}

void request_cancellation(int signal) noexcept {
    int none = 0;
    g_signal.compare_exchange_strong(none, signal, std::memory_order_relaxed);
}

int cancellation_signal() noexcept { return g_signal.load(std::memory_order_relaxed); }

void throw_if_cancelled() {
    if (const int signal = cancellation_signal()) throw Cancelled(signal);
}

}  // namespace ptwm
