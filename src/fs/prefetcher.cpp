#include "prefetcher.hpp"

#include <algorithm>
#include <system_error>

#include "log.hpp"

namespace ptwmfs {
namespace {

// The kernel issues readahead requests asynchronously and our threads may
// serve them out of order, so "sequential" allows at least this much slack
// around the expected offset (twice the kernel's window when that is more).
constexpr uint64_t kMinReorderSlack = 4ull << 20;
// Reads in a row that must continue each other before decoding ahead: one
// read of a tensor by a random-access reader should not trigger it.
constexpr unsigned kSequentialReads = 3;
// Bound on queued jobs, against many files read sequentially at once.
constexpr size_t kMaxQueuedJobs = 4096;

}  // namespace

Prefetcher::Prefetcher(ptwm::ChunkCache& cache, unsigned workers, uint64_t window, uint64_t kernel_readahead)
    : cache_(cache),
      worker_count_(worker_threads(workers, window)),
      window_(std::min(window, cache.capacity() / 4)),
      reorder_slack_(std::max(kMinReorderSlack, 2 * kernel_readahead)) {}

Prefetcher::~Prefetcher() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        jobs_.clear();
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void Prefetcher::start() {
    try {
        for (unsigned i = 0; i < worker_count_; ++i) workers_.emplace_back([this] { work(); });
    } catch (const std::system_error& e) {
        // Fewer workers decode ahead less; reads still decode what they need.
        log_error("started %zu of %u decode-ahead workers: %s", workers_.size(), worker_count_, e.what());
    }
}

void Prefetcher::note_read(AccessPattern& pattern, const StoreFile& store, const LoadedStorePtr& loaded,
                           uint64_t offset, uint64_t length) {
    const uint64_t end = std::min(offset + length, store.size());
    uint64_t from = 0, to = 0, release_from = 0, release_to = 0;
    {
        std::lock_guard lock(pattern.mutex_);
        const bool continues = offset + reorder_slack_ >= pattern.next_offset_ &&
                               offset <= pattern.next_offset_ + reorder_slack_;
        if (continues) {
            ++pattern.sequential_run_;
            pattern.next_offset_ = std::max(pattern.next_offset_, end);
        } else {
            pattern.sequential_run_ = 0;
            pattern.next_offset_ = end;
            pattern.queued_until_ = 0;
            pattern.released_until_ = offset;  // a new run: what lies before it is not ours to release
            pattern.progress_->run.fetch_add(1, std::memory_order_relaxed);
        }
        pattern.progress_->next_offset.store(pattern.next_offset_, std::memory_order_relaxed);
        if (pattern.sequential_run_ < kSequentialReads) return;
        // Chunks wholly behind the reader (past the reorder slack) have been
        // served; the kernel's page cache holds their bytes now.
        if (pattern.next_offset_ > reorder_slack_) {
            release_from = pattern.released_until_;
            release_to = pattern.next_offset_ - reorder_slack_;
            pattern.released_until_ = std::max(release_from, release_to);
        }
        if (workers_.empty() || window_ == 0) {
            from = to = 0;
        } else {
            from = std::max(pattern.queued_until_, pattern.next_offset_);
            to = std::min(pattern.next_offset_ + window_, store.size());
        }
        if (from < to) pattern.queued_until_ = to;
    }
    if (release_from < release_to) {
        auto [first, last] = StoreFile::chunks_covering(*loaded, release_from, release_to);
        const ptwm::ChunkIndex& index = loaded->reader->index();
        // The last chunk may reach past release_to: keep it.
        for (size_t i = first; i < last; ++i)
            if (index.original_offset(i) + index.original_length(i) <= release_to) cache_.release({store.id(), i});
    }
    if (from >= to) return;

    auto [first, last] = StoreFile::chunks_covering(*loaded, from, to);
    size_t added = 0;
    std::shared_ptr<ReaderProgress> progress;
    uint64_t run = 0;
    {
        std::lock_guard lock(pattern.mutex_);
        progress = pattern.progress_;
        run = progress->run.load(std::memory_order_relaxed);
    }
    {
        std::lock_guard lock(mutex_);
        for (size_t i = first; i < last; ++i) {
            if (jobs_.size() >= kMaxQueuedJobs) {
                dropped_ += last - i;
                break;
            }
            jobs_.push_back({&store, loaded, i, progress, run});
            ++added;
        }
    }
    queued_ += added;
    if (added == 1) {
        wake_.notify_one();
    } else if (added > 1) {
        wake_.notify_all();
    }
}

void Prefetcher::work() {
    for (;;) {
        Job job{};
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
            if (stopping_) return;
            job = jobs_.front();
            jobs_.pop_front();
        }
        if (is_stale(job)) {
            ++stale_;
            continue;
        }
        job.store->prefetch(*job.loaded, job.chunk, cache_);
    }
}

bool Prefetcher::is_stale(const Job& job) {
    if (job.progress->run.load(std::memory_order_relaxed) != job.run) return true;
    // Passed: the reader got it (decoding it itself if it had to); it is
    // cached still, or released on purpose.
    const ptwm::ChunkEntry chunk = job.loaded->reader->chunk(job.chunk);
    return chunk.original_offset + chunk.original_length <= job.progress->next_offset.load(std::memory_order_relaxed);
}

PrefetchStats Prefetcher::stats() const {
    return {queued_.load(), dropped_.load(), stale_.load()};
}

}  // namespace ptwmfs
