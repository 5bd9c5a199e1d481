#include "ptwm/store/chunk_cache.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <latch>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ptwm/base/error.hpp"

namespace {

using ptwm::ChunkCache;
using ptwm::ChunkKey;
using ptwm::ChunkPtr;

// Chunks are counted at ChunkCache::footprint: whole pages plus their
// entry. Lengths of whole pages keep the arithmetic of these tests plain.
const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));
size_t footprint(size_t length) { return ChunkCache::footprint(length); }

// A decoder that fills the chunk with one byte and counts its calls.
struct CountingDecoder {
    std::atomic<int> calls{0};
    ChunkCache::Decoder fill(uint8_t value) {
        return [this, value](std::span<uint8_t> out) {
            ++calls;
            std::fill(out.begin(), out.end(), value);
        };
    }
};

TEST(ChunkCache, HitAfterMissReturnsSameBytes) {
    ChunkCache cache(10 * footprint(100));
    CountingDecoder decoder;
    ChunkPtr first = cache.get({1, 7}, 100, decoder.fill(42));
    ChunkPtr second = cache.get({1, 7}, 100, decoder.fill(99));
    EXPECT_EQ(first, second);
    EXPECT_EQ(decoder.calls, 1);
    ASSERT_EQ(second->size(), 100u);
    EXPECT_EQ(second->bytes()[0], 42);
    auto s = cache.stats();
    EXPECT_EQ(s.misses, 1u);
    EXPECT_EQ(s.hits, 1u);
    EXPECT_EQ(s.bytes_decoded, 100u);
    EXPECT_EQ(s.cached_bytes, footprint(100));
}

// A chunk holds whole pages and an entry however short it is: a cache of
// many small chunks (FP4 checkpoints' scales and biases) counts that, so
// its bound is the memory it holds.
TEST(ChunkCache, CountsWholePagesAndTheEntry) {
    EXPECT_EQ(footprint(1), kPage + ChunkCache::kEntryBytes);
    EXPECT_EQ(footprint(kPage), kPage + ChunkCache::kEntryBytes);
    EXPECT_EQ(footprint(kPage + 1), 2 * kPage + ChunkCache::kEntryBytes);
    ChunkCache cache(10 * footprint(100));
    CountingDecoder decoder;
    for (uint64_t i = 0; i < 100; ++i) cache.get({4, i}, 100, decoder.fill(1));
    const auto s = cache.stats();
    EXPECT_EQ(s.cached_chunks, 10u);
    EXPECT_EQ(s.cached_bytes, 10 * footprint(100));
    EXPECT_EQ(s.evictions, 90u);
}

TEST(ChunkCache, KeysDifferingInStoreAreDistinct) {
    ChunkCache cache(1 << 20);
    CountingDecoder decoder;
    cache.get({1, 0}, 10, decoder.fill(1));
    ChunkPtr other = cache.get({2, 0}, 10, decoder.fill(2));
    EXPECT_EQ(decoder.calls, 2);
    EXPECT_EQ(other->bytes()[0], 2);
}

TEST(ChunkCache, EvictsLeastRecentlyUsedByBytes) {
    ChunkCache cache(3 * footprint(kPage));
    CountingDecoder decoder;
    cache.get({0, 0}, kPage, decoder.fill(0));
    cache.get({0, 1}, kPage, decoder.fill(1));
    cache.get({0, 2}, kPage, decoder.fill(2));
    cache.get({0, 0}, kPage, decoder.fill(0));  // touch 0: 1 is now the oldest
    ChunkPtr held = cache.get({0, 1}, kPage, decoder.fill(1));
    EXPECT_EQ(cache.stats().evictions, 0u);

    cache.get({0, 3}, kPage + kPage / 2, decoder.fill(3));  // two pages: evicts 2 and 0
    auto s = cache.stats();
    EXPECT_EQ(s.evictions, 2u);
    EXPECT_LE(s.cached_bytes, 3 * footprint(kPage));
    EXPECT_TRUE(cache.contains({0, 1}));
    EXPECT_TRUE(cache.contains({0, 3}));
    EXPECT_FALSE(cache.contains({0, 0}));
    EXPECT_FALSE(cache.contains({0, 2}));
}

TEST(ChunkCache, EvictedChunkStaysAliveWhileHeld) {
    ChunkCache cache(footprint(100));
    CountingDecoder decoder;
    ChunkPtr held = cache.get({0, 0}, 100, decoder.fill(5));
    cache.get({0, 1}, 100, decoder.fill(6));
    EXPECT_FALSE(cache.contains({0, 0}));
    EXPECT_EQ(held->bytes()[99], 5);
}

TEST(ChunkCache, ChunkLargerThanCapacityIsServedNotKept) {
    ChunkCache cache(footprint(kPage));
    CountingDecoder decoder;
    ChunkPtr big = cache.get({0, 0}, 2 * kPage, decoder.fill(3));
    EXPECT_EQ(big->size(), 2 * kPage);
    cache.get({0, 1}, 10, decoder.fill(4));
    EXPECT_FALSE(cache.contains({0, 0}));
    EXPECT_LE(cache.stats().cached_bytes, footprint(kPage));
}

// Decodes in flight cannot be evicted, so while several run the cache may
// hold more than its bound; once they are done it is within it again. (A
// decode nested in another, as FP4 blocks get their scale chunk, is the
// case without threads; a CI run of the mount's stress test, eight
// readers, ended with 1.7 MB in a 1 MiB cache.)
TEST(ChunkCache, DecodesInFlightPastTheBoundAreEvictedOnceDone) {
    ChunkCache cache(footprint(kPage) + footprint(kPage) / 2);
    CountingDecoder decoder;
    cache.get({2, 0}, kPage, [&](std::span<uint8_t> out) {
        // Two chunks in a cache of one and a half, the outer one in
        // flight: the inner chunk, the only one that can go, goes once
        // decoded.
        const ChunkPtr inner = cache.get({2, 1}, kPage, decoder.fill(5));
        EXPECT_EQ(inner->bytes()[0], 5);
        EXPECT_FALSE(cache.contains({2, 1}));
        EXPECT_EQ(cache.stats().cached_bytes, footprint(kPage));
        std::fill(out.begin(), out.end(), uint8_t{6});
    });
    const ptwm::ChunkCacheStats s = cache.stats();
    EXPECT_LE(s.cached_bytes, s.capacity_bytes);
    EXPECT_TRUE(cache.contains({2, 0}));
}

TEST(ChunkCache, ConcurrentRequestsMergeIntoOneDecode) {
    ChunkCache cache(1 << 20);
    constexpr int kThreads = 8;
    std::atomic<int> calls{0};
    std::latch decode_started(1);
    std::latch all_waiting(kThreads - 1);
    auto slow_decode = [&](std::span<uint8_t> out) {
        ++calls;
        decode_started.count_down();
        // Hold the decode until every other thread has asked for the key.
        all_waiting.wait();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::fill(out.begin(), out.end(), 7);
    };

    std::vector<ChunkPtr> results(kThreads);
    std::vector<std::thread> threads;
    threads.emplace_back([&] { results[0] = cache.get({3, 3}, 4096, slow_decode); });
    decode_started.wait();
    for (int t = 1; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            all_waiting.count_down();
            results[t] = cache.get({3, 3}, 4096, slow_decode);
        });
    }
    for (auto& th : threads) th.join();

    EXPECT_EQ(calls, 1);
    for (const auto& r : results) {
        ASSERT_TRUE(r);
        EXPECT_EQ(r, results[0]);
        EXPECT_EQ(r->bytes()[4095], 7);
    }
    auto s = cache.stats();
    EXPECT_EQ(s.misses, 1u);
    EXPECT_EQ(s.hits + s.merged_waits, static_cast<uint64_t>(kThreads - 1));
}

TEST(ChunkCache, FailedDecodeReachesWaitersAndIsNotCached) {
    ChunkCache cache(1 << 20);
    auto failing = [](std::span<uint8_t>) { throw std::runtime_error("bad checksum"); };
    EXPECT_THROW(cache.get({0, 0}, 10, failing), std::runtime_error);
    EXPECT_FALSE(cache.contains({0, 0}));
    EXPECT_EQ(cache.stats().cached_bytes, 0u);
    EXPECT_EQ(cache.stats().decode_failures, 1u);

    CountingDecoder decoder;
    ChunkPtr retried = cache.get({0, 0}, 10, decoder.fill(1));
    EXPECT_EQ(decoder.calls, 1);
    EXPECT_EQ(retried->bytes()[0], 1);
}

// Every reader that waited for a decode that failed gets the error: a copy
// of its own, of the class the decoder threw (the daemon logs CorruptData
// once per chunk and tells it from a failed request by it), never the one
// exception object rethrown on several threads at once (ThreadSanitizer
// runs this in CI).
TEST(ChunkCache, FailedDecodeReachesEveryWaiterAsACopyOfItsOwn) {
    ChunkCache cache(1 << 20);
    constexpr int kThreads = 8;
    std::latch decode_started(1);
    std::latch all_waiting(kThreads - 1);
    auto failing = [&](std::span<uint8_t>) {
        decode_started.count_down();
        all_waiting.wait();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        throw ptwm::CorruptData("store.ptwm: chunk 3: checksum mismatch");
    };
    std::vector<std::string> messages(kThreads);
    std::vector<std::thread> threads;
    auto request = [&](int t) {
        try {
            cache.get({3, 3}, 4096, failing);
        } catch (const ptwm::CorruptData& e) {
            messages[t] = e.what();
        } catch (const std::exception& e) {
            messages[t] = std::string("another class: ") + e.what();
        }
    };
    threads.emplace_back(request, 0);
    decode_started.wait();
    for (int t = 1; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            all_waiting.count_down();
            request(t);
        });
    }
    for (auto& th : threads) th.join();

    EXPECT_EQ(cache.stats().decode_failures, 1u);
    EXPECT_GE(cache.stats().merged_waits, 1u);
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(messages[t], "store.ptwm: chunk 3: checksum mismatch") << t;
    EXPECT_FALSE(cache.contains({3, 3}));
}

}  // namespace

namespace ptwm {
namespace {

// A decode that gets another chunk (FP4 blocks their scale chunk) has the
// nested decode's time counted once, under the nested chunk: the stats'
// decode time is the sum of what the decoders did.
TEST(ChunkCache, ANestedDecodeIsTimedOnce) {
    ChunkCache cache(1 << 20);
    std::chrono::steady_clock::duration inner{};
    cache.get({1, 0}, 64, [&](std::span<uint8_t> out) {
        cache.get({1, 1}, 64, [&](std::span<uint8_t> scales) {
            const auto start = std::chrono::steady_clock::now();
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            std::fill(scales.begin(), scales.end(), uint8_t{1});
            inner = std::chrono::steady_clock::now() - start;
        });
        std::fill(out.begin(), out.end(), uint8_t{2});
    });
    const auto inner_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(inner).count());
    const ChunkCacheStats s = cache.stats();
    EXPECT_EQ(s.misses, 2u);
    EXPECT_GE(s.decode_ns, inner_ns);
    EXPECT_LT(s.decode_ns, inner_ns + inner_ns / 2) << "the nested decode was counted twice";
}

}  // namespace
}  // namespace ptwm
