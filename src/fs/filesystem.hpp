// The FUSE low-level operations: a read-only view of the Tree, with store
// contents served through the chunk cache.
#pragma once

#include <fuse_lowlevel.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "index_cache.hpp"
#include "prefetcher.hpp"
#include "ptwm/store/chunk_cache.hpp"
#include "stats.hpp"
#include "tree.hpp"

namespace ptwmfs {

struct OpenFile;

class Filesystem {
public:
    Filesystem(const Tree& tree, ptwm::ChunkCache& cache, IndexCache& indexes, Prefetcher& prefetcher);
    ~Filesystem();  // frees the files the kernel never released

    // The operations table; each callback finds this object as the
    // session's userdata.
    static const fuse_lowlevel_ops& operations();

    std::string stats_json() const;

    const Tree& tree() const { return tree_; }
    ptwm::ChunkCache& cache() { return cache_; }
    IndexCache& indexes() { return indexes_; }
    Prefetcher& prefetcher() { return prefetcher_; }
    ReadStats& read_stats() { return read_stats_; }

    // Open files are owned here, from open to release: a session that ends
    // with files still open (SIGTERM, an aborted connection) gets no
    // release for them.
    OpenFile* keep_open(std::unique_ptr<OpenFile> file);
    void release(OpenFile* file);

    // Stateless opens: when the kernel supports it (FUSE_NO_OPEN_SUPPORT),
    // open answers ENOSYS once and the kernel then opens files without
    // asking us and sends no release either. That saves a round trip to
    // the daemon on every open(), which costs more than reading a small
    // file from the page cache. Reads then come with no file handle: the
    // state of an open file lives per inode instead.
    bool stateless_open() const { return stateless_open_.load(std::memory_order_relaxed); }
    void set_stateless_open(bool on) { stateless_open_.store(on, std::memory_order_relaxed); }
    // A plain file's descriptor in the store directory, opened on first
    // use and shared by all readers; -1 with errno set on failure.
    int shared_fd(const Node& node);
    // The decode-ahead pattern for a read of a store at `offset`: one of a
    // few streams per inode, the one this read continues, else the least
    // recently used, so concurrent readers of one file keep their own.
    AccessPattern& stream_pattern(const Node& node, uint64_t offset, uint64_t length);

    // -o kernel_readahead: the kernel takes the smaller of its default
    // (128 KiB) and what our INIT reply asks for, so a larger read-ahead
    // window can only be set through sysfs, after INIT: the first request
    // that follows it does so (apply_kernel_readahead). Only root may; a
    // failure is an error when the user asked for it (`required`), and a
    // notice when it was our default.
    void set_kernel_readahead(std::string mountpoint, uint64_t bytes, bool required);
    void apply_kernel_readahead() {
        if (!kernel_readahead_pending_.load(std::memory_order_relaxed)) return;
        std::call_once(kernel_readahead_once_, [this] { write_kernel_readahead(); });
    }

private:
    void write_kernel_readahead();

    struct StreamSet {
        static constexpr size_t kStreams = 4;
        std::array<AccessPattern, kStreams> patterns;
        std::array<uint64_t, kStreams> next_offset{};
        std::array<uint64_t, kStreams> last_used{};
        uint64_t clock = 0;
    };

    const Tree& tree_;
    ptwm::ChunkCache& cache_;
    IndexCache& indexes_;
    Prefetcher& prefetcher_;
    ReadStats read_stats_;
    std::mutex open_files_mutex_;
    std::unordered_map<OpenFile*, std::unique_ptr<OpenFile>> open_files_;
    std::atomic<bool> stateless_open_{false};
    std::string mountpoint_;
    uint64_t kernel_readahead_ = 0;
    bool kernel_readahead_required_ = false;
    std::atomic<bool> kernel_readahead_pending_{false};
    std::once_flag kernel_readahead_once_;
    std::mutex shared_fds_mutex_;
    std::unordered_map<fuse_ino_t, UniqueFd> shared_fds_;
    std::mutex streams_mutex_;
    std::unordered_map<fuse_ino_t, std::unique_ptr<StreamSet>> streams_;
};

}  // namespace ptwmfs
