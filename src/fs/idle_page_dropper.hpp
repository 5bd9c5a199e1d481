// Drops the page cache of local stores that have gone idle (-o
// page_cache=drop). Reading a store drops its pages in spans of a few MiB
// as they fill (ptwm::LocalFileSource::drop_read_pages); the span a reader
// was in when it stopped never fills, and FUSE tells the daemon nothing when
// a reader is done (stateless opens get no release). So a thread looks at
// every local store now and then and drops the pages of those no read has
// touched for a while.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "ptwm/base/byte_source.hpp"

namespace ptwmfs {

class IdlePageDropper {
public:
    using Sources = std::vector<std::shared_ptr<const ptwm::LocalFileSource>>;
    // A store is idle once no read has come for `idle`; the stores are
    // looked at every `tick`.
    IdlePageDropper(Sources sources, std::chrono::milliseconds idle, std::chrono::milliseconds tick);
    ~IdlePageDropper();
    IdlePageDropper(const IdlePageDropper&) = delete;
    IdlePageDropper& operator=(const IdlePageDropper&) = delete;

    // Starts the thread (after the daemon forks, as Prefetcher::start). A
    // no-op when no store uses policy drop.
    void start();

private:
    void run();

    Sources sources_;
    const std::chrono::milliseconds idle_, tick_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace ptwmfs
