#include "idle_page_dropper.hpp"

#include <algorithm>

namespace ptwmfs {

IdlePageDropper::IdlePageDropper(Sources sources, std::chrono::milliseconds idle, std::chrono::milliseconds tick)
    : sources_(std::move(sources)), idle_(idle), tick_(tick) {
    std::erase_if(sources_, [](const auto& s) { return s->policy() != ptwm::PageCachePolicy::drop; });
}

IdlePageDropper::~IdlePageDropper() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void IdlePageDropper::start() {
    if (!sources_.empty()) thread_ = std::thread([this] { run(); });
}

void IdlePageDropper::run() {
    std::unique_lock lock(mutex_);
    while (!wake_.wait_for(lock, tick_, [this] { return stopping_; })) {
        lock.unlock();
        const auto now = std::chrono::steady_clock::now();
        for (const auto& source : sources_) source->drop_pages_if_idle(now, idle_);
        lock.lock();
    }
}

}  // namespace ptwmfs
