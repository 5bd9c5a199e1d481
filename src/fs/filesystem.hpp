// The FUSE low-level operations: a read-only view of the Tree, with store
// contents served through the chunk cache.
#pragma once

#include <fuse_lowlevel.h>

#include <memory>
#include <mutex>
#include <unordered_map>

#include "prefetcher.hpp"
#include "ptwm/chunk_cache.hpp"
#include "stats.hpp"
#include "tree.hpp"

namespace ptwmfs {

struct OpenFile;

class Filesystem {
public:
    Filesystem(const Tree& tree, ptwm::ChunkCache& cache, Prefetcher& prefetcher);
    ~Filesystem();  // frees the files the kernel never released

    // The operations table; each callback finds this object as the
    // session's userdata.
    static const fuse_lowlevel_ops& operations();

    std::string stats_json() const;

    const Tree& tree() const { return tree_; }
    ptwm::ChunkCache& cache() { return cache_; }
    Prefetcher& prefetcher() { return prefetcher_; }
    ReadStats& read_stats() { return read_stats_; }

    // Open files are owned here, from open to release: a session that ends
    // with files still open (SIGTERM, an aborted connection) gets no
    // release for them.
    OpenFile* keep_open(std::unique_ptr<OpenFile> file);
    void release(OpenFile* file);

private:
    const Tree& tree_;
    ptwm::ChunkCache& cache_;
    Prefetcher& prefetcher_;
    ReadStats read_stats_;
    std::mutex open_files_mutex_;
    std::unordered_map<OpenFile*, std::unique_ptr<OpenFile>> open_files_;
};

}  // namespace ptwmfs
