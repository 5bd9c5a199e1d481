#include "base/worker_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace ptwm {
namespace {

TEST(WorkerPool, RunsEveryIndexOnceInEveryLoop) {
    WorkerPool pool(4);
    EXPECT_EQ(pool.threads(), 4u);
    for (size_t n : {0u, 1u, 2u, 7u, 1000u}) {
        std::vector<std::atomic<int>> calls(n);
        pool.run(n, [&](size_t i) { calls[i]++; });
        for (size_t i = 0; i < n; ++i) EXPECT_EQ(calls[i].load(), 1) << "index " << i << " of " << n;
    }
}

// The point of the pool: the threads of one loop are the threads of the
// next, so what they keep in thread_local storage is set up once.
// (A thread's number is set when its thread_local is first used: a new
// thread gets a new number even where the system reuses a thread id.)
std::atomic<int> g_next_thread_number{0};
int thread_number() {
    thread_local const int number = g_next_thread_number++;
    return number;
}

TEST(WorkerPool, TheSameThreadsServeEveryLoop) {
    WorkerPool pool(3);
    std::set<int> seen;
    std::mutex m;
    for (int loop = 0; loop < 5; ++loop)
        pool.run(64, [&](size_t) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));  // room for every thread to take some
            std::lock_guard lock(m);
            seen.insert(thread_number());
        });
    EXPECT_LE(seen.size(), 3u) << "a loop ran on threads the others did not";
    EXPECT_GE(seen.size(), 2u) << "the workers never took part";
}

TEST(WorkerPool, AnErrorReachesTheCallerAndThePoolGoesOn) {
    WorkerPool pool(3);
    std::atomic<int> after{0};
    EXPECT_THROW(pool.run(100,
                          [&](size_t i) {
                              if (i == 10) throw std::runtime_error("chunk 10 is damaged");
                          }),
                 std::runtime_error);
    pool.run(50, [&](size_t) { after++; });
    EXPECT_EQ(after.load(), 50);
}

TEST(WorkerPool, OneThreadRunsOnTheCaller) {
    WorkerPool pool(1);
    const auto caller = std::this_thread::get_id();
    bool elsewhere = false;
    pool.run(10, [&](size_t) { elsewhere |= std::this_thread::get_id() != caller; });
    EXPECT_FALSE(elsewhere);
}

}  // namespace
}  // namespace ptwm
