// The FUSE low-level operations: a read-only view of the Tree, with store
// contents served through the chunk cache.
#pragma once

#include <fuse_lowlevel.h>

#include "prefetcher.hpp"
#include "ptwm/chunk_cache.hpp"
#include "stats.hpp"
#include "tree.hpp"

namespace ptwmfs {

class Filesystem {
public:
    Filesystem(const Tree& tree, ptwm::ChunkCache& cache, Prefetcher& prefetcher)
        : tree_(tree), cache_(cache), prefetcher_(prefetcher) {}

    // The operations table; each callback finds this object as the
    // session's userdata.
    static const fuse_lowlevel_ops& operations();

    std::string stats_json() const;

    const Tree& tree() const { return tree_; }
    ptwm::ChunkCache& cache() { return cache_; }
    Prefetcher& prefetcher() { return prefetcher_; }
    ReadStats& read_stats() { return read_stats_; }

private:
    const Tree& tree_;
    ptwm::ChunkCache& cache_;
    Prefetcher& prefetcher_;
    ReadStats read_stats_;
};

}  // namespace ptwmfs
