#include "ptwm/base/byte_source.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "ptwm/base/error.hpp"

namespace ptwm {
namespace {

// O_DIRECT needs offsets, lengths and buffers aligned to the device's
// logical block; 4 KiB covers every device Linux runs on in practice.
constexpr uint64_t kDirectAlign = 4096;
constexpr uint64_t kPage = 4096;
// The largest folio a file system caches a file in: a PMD, 2 MiB on x86-64.
constexpr uint64_t kMaxFolio = 2ull << 20;

std::atomic<PageCachePolicy> g_default_policy{PageCachePolicy::keep};

// A 4 KiB-aligned buffer per thread for O_DIRECT reads, grown as needed.
struct AlignedBuffer {
    uint8_t* data = nullptr;
    size_t size = 0;
    ~AlignedBuffer() { std::free(data); }
    uint8_t* at_least(size_t n) {
        if (n > size) {
            std::free(data);
            data = static_cast<uint8_t*>(std::aligned_alloc(kDirectAlign, n));
            if (data == nullptr) throw std::bad_alloc();
            size = n;
        }
        return data;
    }
};
thread_local AlignedBuffer t_direct;

}  // namespace

void ByteSource::read_exact(uint64_t offset, std::span<uint8_t> out) const {
    check_read_complete(name(), offset, out.size(), read_up_to(offset, out));
}

std::optional<PageCachePolicy> parse_page_cache_policy(std::string_view text) {
    if (text == "keep") return PageCachePolicy::keep;
    if (text == "drop") return PageCachePolicy::drop;
    if (text == "direct") return PageCachePolicy::direct;
    return std::nullopt;
}

const char* name(PageCachePolicy policy) {
    switch (policy) {
        case PageCachePolicy::keep: return "keep";
        case PageCachePolicy::drop: return "drop";
        case PageCachePolicy::direct: return "direct";
    }
    return "?";
}

PageCachePolicy default_page_cache_policy() { return g_default_policy.load(std::memory_order_relaxed); }
void set_default_page_cache_policy(PageCachePolicy policy) { g_default_policy.store(policy, std::memory_order_relaxed); }

LocalFileSource::LocalFileSource(File file, PageCachePolicy policy)
    : file_(std::move(file)),
      size_(file_.size()),
      policy_(policy),
      // A sixteenth of the file, within [4 MiB, 16 MiB] (twice the largest
      // folio at least): about what stays cached once a reader stops.
      drop_every_(std::clamp<uint64_t>(size_ / 16, 4ull << 20, 16ull << 20)) {
    if (policy_ == PageCachePolicy::direct) {
        // Through /proc/self/fd: the same file, whatever its path does meanwhile.
        const std::string self = "/proc/self/fd/" + std::to_string(file_.fd());
        direct_fd_ = ::open(self.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
        // File systems without O_DIRECT (tmpfs before 6.6): cached reads, dropped after.
        if (direct_fd_ < 0) policy_ = PageCachePolicy::drop;
    }
}

LocalFileSource::~LocalFileSource() {
    if (direct_fd_ >= 0) ::close(direct_fd_);
}

std::unique_ptr<LocalFileSource> LocalFileSource::open(const std::string& path) {
    return open(path, default_page_cache_policy());
}

std::unique_ptr<LocalFileSource> LocalFileSource::open(const std::string& path, PageCachePolicy policy) {
    return std::make_unique<LocalFileSource>(File::open_read(path), policy);
}

size_t LocalFileSource::read_up_to(uint64_t offset, std::span<uint8_t> out) const {
    if (policy_ == PageCachePolicy::direct) return read_direct(offset, out);
    const size_t done = file_.read_up_to(offset, out);
    if (policy_ == PageCachePolicy::drop && done > 0) drop_read_pages(offset, done);
    return done;
}

void LocalFileSource::drop_read_pages(uint64_t offset, size_t length) const {
    // Not range by range: ext4 caches a file in large folios (up to 2 MiB
    // here) and POSIX_FADV_DONTNEED leaves every folio that reaches past
    // the range, so dropping each chunk's ~200 KiB after reading it drops
    // nearly nothing. Instead the span read since the last drop goes once it
    // holds drop_every_ bytes. The next span starts kMaxFolio before this
    // one's end, so the folio straddling that end lies wholly inside it.
    // What a random reader skipped inside a span goes too, which costs
    // nothing: it was not wanted.
    uint64_t first = 0, last = 0;
    {
        std::lock_guard lock(drop_mutex_);
        read_since_idle_drop_ = true;
        last_read_ = std::chrono::steady_clock::now();
        span_begin_ = std::min(span_begin_, offset);
        span_end_ = std::max<uint64_t>(span_end_, offset + length);
        span_bytes_ += length;
        if (span_bytes_ < drop_every_) return;
        first = span_begin_ / kPage * kPage;
        last = span_end_ / kPage * kPage;
        span_begin_ = last > kMaxFolio ? last - kMaxFolio : 0;
        span_end_ = 0;
        span_bytes_ = 0;
    }
    if (last > first)
        ::posix_fadvise(file_.fd(), static_cast<off_t>(first), static_cast<off_t>(last - first), POSIX_FADV_DONTNEED);
}

void LocalFileSource::drop_pages_if_idle(std::chrono::steady_clock::time_point now,
                                         std::chrono::steady_clock::duration idle) const {
    if (policy_ != PageCachePolicy::drop) return;
    {
        std::lock_guard lock(drop_mutex_);
        if (!read_since_idle_drop_ || now - last_read_ < idle) return;
        read_since_idle_drop_ = false;
        span_begin_ = UINT64_MAX;
        span_end_ = 0;
        span_bytes_ = 0;
    }
    // The whole file: what the kernel read ahead past the last span, and
    // the folios around it, are outside the span's bounds.
    ::posix_fadvise(file_.fd(), 0, 0, POSIX_FADV_DONTNEED);
}

size_t LocalFileSource::read_direct(uint64_t offset, std::span<uint8_t> out) const {
    if (out.empty() || offset >= size_) return 0;
    const uint64_t begin = offset / kDirectAlign * kDirectAlign;
    const uint64_t end = (offset + out.size() + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
    uint8_t* buffer = t_direct.at_least(end - begin);
    uint64_t done = 0;
    while (done < end - begin) {
        const ssize_t r = ::pread(direct_fd_, buffer + done, end - begin - done, static_cast<off_t>(begin + done));
        if (r < 0) {
            if (errno == EINTR) continue;
            throw_errno(name(), "direct read failed at offset " + std::to_string(begin + done));
        }
        if (r == 0) break;
        done += static_cast<uint64_t>(r);
        if (done % kDirectAlign != 0) break;  // the end of the file
    }
    const uint64_t available = begin + done > offset ? begin + done - offset : 0;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(available, out.size()));
    std::memcpy(out.data(), buffer + (offset - begin), n);
    return n;
}

}  // namespace ptwm
