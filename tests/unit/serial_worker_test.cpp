#include "base/serial_worker.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <stdexcept>
#include <vector>

namespace ptwm {
namespace {

TEST(SerialWorker, RunsJobsInTheOrderTheyCame) {
    std::vector<int> ran;  // written by the worker only, read after wait_all
    SerialWorker w;
    for (int i = 0; i < 100; ++i) w.submit([&ran, i] { ran.push_back(i); });
    w.wait_all();
    ASSERT_EQ(ran.size(), 100u);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(ran[static_cast<size_t>(i)], i);
}

TEST(SerialWorker, WaitReturnsOnceItsJobAndThoseBeforeHaveRun) {
    std::atomic<int> ran{0};
    SerialWorker w;
    uint64_t third = 0;
    for (int i = 0; i < 3; ++i) third = w.submit([&] { ++ran; });
    w.submit([&] { ++ran; });
    w.wait(third);
    EXPECT_GE(ran.load(), 3);
    w.wait_all();
    EXPECT_EQ(ran.load(), 4);
}

TEST(SerialWorker, AFailedJobIsRethrownAndTheJobsAfterItAreSkipped) {
    std::atomic<int> after{0};
    SerialWorker w;
    w.submit([] { throw std::runtime_error("read failed at offset 42"); });
    const uint64_t last = w.submit([&] { ++after; });  // a write that must not follow a failed read
    try {
        w.wait(last);
        FAIL() << "the job's error was not rethrown";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "read failed at offset 42");
    }
    EXPECT_EQ(after.load(), 0);
    EXPECT_THROW(w.wait_all(), std::runtime_error);  // and it stays failed
}

TEST(SerialWorker, DestroyingItLetsTheRunningJobFinishAndDropsTheQueuedOnes) {
    std::atomic<int> ran{0};
    std::atomic<bool> started{false}, release{false};
    // Lets the running job go only once the destructor has had time to clear
    // the queue (it then waits for that job).
    std::thread releaser([&] {
        while (!started.load()) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        release = true;
    });
    {
        SerialWorker w;
        w.submit([&] {
            started = true;
            while (!release.load()) std::this_thread::yield();
            ++ran;
        });
        for (int i = 0; i < 10; ++i) w.submit([&] { ++ran; });
        while (!started.load()) std::this_thread::yield();
    }
    releaser.join();
    EXPECT_EQ(ran.load(), 1);
}

}  // namespace
}  // namespace ptwm
