// SharedError: what a failure shared by several threads throws to each.
#include "ptwm/base/error.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ptwm/base/cancellation.hpp"

namespace {

using ptwm::SharedError;

template <class E>
SharedError shared(const E& thrown) {
    try {
        throw thrown;
    } catch (...) {
        return SharedError::current();
    }
}

// The class and message of what raise() throws.
std::string raised(const SharedError& error) {
    try {
        error.raise();
    } catch (const ptwm::CorruptData& e) {
        return std::string("CorruptData: ") + e.what();
    } catch (const ptwm::Error& e) {
        return std::string("Error: ") + e.what();
    } catch (const ptwm::Cancelled& e) {
        return "Cancelled by " + std::to_string(e.signal());
    } catch (...) {
        return "something else";
    }
    return "nothing";
}

TEST(SharedError, KeepsTheClassAndMessage) {
    EXPECT_EQ(raised(shared(ptwm::CorruptData("a.ptwm: chunk 2: checksum"))), "CorruptData: a.ptwm: chunk 2: checksum");
    EXPECT_EQ(raised(shared(ptwm::Error("a.ptwm: truncated"))), "Error: a.ptwm: truncated");
    EXPECT_EQ(raised(shared(ptwm::Cancelled(SIGINT))), "Cancelled by " + std::to_string(SIGINT));
    // Anything else (bad_alloc, system_error) becomes an Error with its message.
    EXPECT_EQ(raised(shared(std::runtime_error("out of memory"))), "Error: out of memory");
    EXPECT_TRUE(shared(ptwm::Error("x")));
    EXPECT_FALSE(SharedError());
    EXPECT_EQ(raised(SharedError()), "Error: no error was recorded");
}

// Threads raising one shared error at once each catch an object of their
// own (ThreadSanitizer runs this in CI).
TEST(SharedError, EachRaiseThrowsAnObjectOfItsOwn) {
    const SharedError error = shared(ptwm::CorruptData("a.ptwm: chunk 2: checksum"));
    constexpr int kThreads = 8;
    std::vector<std::string> got(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 100; ++i) {
                try {
                    error.raise();
                } catch (const ptwm::CorruptData& e) {
                    got[t] = e.what();
                }
            }
        });
    }
    for (auto& th : threads) th.join();
    for (const auto& message : got) EXPECT_EQ(message, "a.ptwm: chunk 2: checksum");
}

}  // namespace
