// Decode-ahead for sequential readers. Each open file keeps an
// AccessPattern; once a few reads in a row continue where the previous one
// ended, the chunks of the next `window` bytes are queued for the worker
// threads, so a cold sequential read keeps every core decoding instead of
// one chunk at a time in the reading thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ptwm/store/chunk_cache.hpp"
#include "store_file.hpp"

namespace ptwmfs {

// Where a sequential reader is, shared with the decode-ahead jobs queued for
// it: a job whose chunk the reader has passed, or that belongs to an
// abandoned run, is skipped. Without this, workers that fall behind (a
// loaded machine) decode chunks the reader already decoded for itself and
// released: on a 2 GB shard at load 8, 57% more decoding and a cache filled
// with chunks nobody reads.
struct ReaderProgress {
    std::atomic<uint64_t> next_offset{0};
    std::atomic<uint64_t> run{0};  // bumped when the reader starts a new run
};

class AccessPattern {
private:
    friend class Prefetcher;
    std::shared_ptr<ReaderProgress> progress_ = std::make_shared<ReaderProgress>();
    std::mutex mutex_;
    uint64_t next_offset_ = 0;     // where a sequential reader goes next
    unsigned sequential_run_ = 0;  // reads in a row that continued the last
    uint64_t queued_until_ = 0;    // decode-ahead queued up to this offset
    uint64_t released_until_ = 0;  // chunks before this were released from the cache
};

struct PrefetchStats {
    uint64_t queued = 0;   // chunks queued for decode-ahead
    uint64_t dropped = 0;  // not queued: queue full
    uint64_t stale = 0;    // dequeued but skipped: the reader had passed them
};

class Prefetcher {
public:
    // `window` 0 or `workers` 0 disables decode-ahead. The window is capped
    // at a quarter of the cache so decoding ahead cannot evict what readers
    // are about to use. `kernel_readahead` is the mount's kernel read-ahead
    // window: its requests arrive out of order by up to about that much, so
    // the reorder slack grows with it.
    Prefetcher(ptwm::ChunkCache& cache, unsigned workers, uint64_t window, uint64_t kernel_readahead = 0);

    // The decode-ahead threads start() starts for these options: none
    // without a window. (The daemon's descriptor check counts them.)
    static unsigned worker_threads(unsigned workers, uint64_t window) { return window > 0 ? workers : 0; }

    // How far from the expected offset a read still counts as sequential,
    // and how far behind a sequential reader chunks are released.
    uint64_t reorder_slack() const { return reorder_slack_; }
    ~Prefetcher();
    Prefetcher(const Prefetcher&) = delete;
    Prefetcher& operator=(const Prefetcher&) = delete;

    // Starts the worker threads. Separate from construction because the
    // daemon forks when it detaches, and threads do not survive a fork.
    void start();

    // Called after each read of `store` through an open file, with the
    // loaded store the read used (queued jobs keep it loaded). For a
    // sequential reader it also releases the chunks it has left behind.
    void note_read(AccessPattern& pattern, const StoreFile& store, const LoadedStorePtr& loaded, uint64_t offset,
                   uint64_t length);

    PrefetchStats stats() const;

private:
    struct Job {
        const StoreFile* store;
        LoadedStorePtr loaded;
        size_t chunk;
        std::shared_ptr<ReaderProgress> progress;
        uint64_t run;
    };
    static bool is_stale(const Job& job);
    void work();

    ptwm::ChunkCache& cache_;
    const unsigned worker_count_;
    const uint64_t window_;
    const uint64_t reorder_slack_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Job> jobs_;
    bool stopping_ = false;
    std::vector<std::thread> workers_;
    std::atomic<uint64_t> queued_{0}, dropped_{0}, stale_{0};
};

}  // namespace ptwmfs
