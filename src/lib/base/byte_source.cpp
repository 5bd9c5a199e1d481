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
// Policy drop: ranges read kept between drops, at most (a drop comes
// early when a reader that skips about leaves more).
constexpr size_t kMaxReadRanges = 2048;

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
    // Only the pages of bytes that were read go, never those between them:
    // the kernel may have read those ahead, and they are still to be read.
    // (A store is not read in file order: an FP4 tensor's values chunk
    // first reads its scales chunk, which lies after all the tensor's
    // values. Dropping everything up to the furthest read, as this once
    // did, threw away the kernel's read-ahead of the values in between:
    // cold reads of an MXFP4 store fetched 1.19 times its size from disk.)
    // Nor do they go read by read: ext4 caches a file in large folios (up to
    // 2 MiB here) and POSIX_FADV_DONTNEED leaves every folio that reaches
    // past the range, so dropping each chunk's ~200 KiB after reading it
    // drops nearly nothing. Ranges read merge as they touch, and go once
    // drop_every_ bytes were read; each keeps its first and last kMaxFolio
    // bytes as a range read, so that the folios straddling its ends go with
    // the ranges next to it, once those are read.
    std::vector<std::pair<uint64_t, uint64_t>> drop;
    {
        std::lock_guard lock(drop_mutex_);
        read_since_idle_drop_ = true;
        last_read_ = std::chrono::steady_clock::now();
        uint64_t begin = offset, end = offset + length;
        auto it = read_ranges_.upper_bound(begin);
        if (it != read_ranges_.begin() && std::prev(it)->second.end >= begin) --it;
        while (it != read_ranges_.end() && it->first <= end) {  // touching or overlapping
            begin = std::min(begin, it->first);
            end = std::max(end, it->second.end);
            it = read_ranges_.erase(it);
        }
        read_ranges_.emplace(begin, ReadRange{end, true});
        read_since_drop_ += length;
        if (read_since_drop_ < drop_every_ && read_ranges_.size() <= kMaxReadRanges) return;
        read_since_drop_ = 0;
        std::map<uint64_t, ReadRange> kept;
        for (const auto& [b, r] : read_ranges_) {
            if (!r.fresh) {  // dropped already, and nothing read next to it since
                kept.emplace(b, r);
                continue;
            }
            // Whole pages inside the range: a page it shares with an unread
            // neighbour stays.
            const uint64_t first = (b + kPage - 1) / kPage * kPage, last = r.end / kPage * kPage;
            if (last > first) drop.emplace_back(first, last);
            if (r.end - b <= 2 * kMaxFolio) {
                kept.emplace(b, ReadRange{r.end, false});
            } else {
                kept.emplace(b, ReadRange{b + kMaxFolio, false});
                kept.emplace(r.end - kMaxFolio, ReadRange{r.end, false});
            }
        }
        // A reader that skips about keeps no more than this many ranges;
        // what it left cached goes when the store is idle.
        if (kept.size() > kMaxReadRanges) kept.clear();
        read_ranges_ = std::move(kept);
    }
    for (const auto& [first, last] : drop)
        ::posix_fadvise(file_.fd(), static_cast<off_t>(first), static_cast<off_t>(last - first), POSIX_FADV_DONTNEED);
}

void LocalFileSource::drop_pages_if_idle(std::chrono::steady_clock::time_point now,
                                         std::chrono::steady_clock::duration idle) const {
    if (policy_ != PageCachePolicy::drop) return;
    {
        std::lock_guard lock(drop_mutex_);
        if (!read_since_idle_drop_ || now - last_read_ < idle) return;
        read_since_idle_drop_ = false;
        read_ranges_.clear();
        read_since_drop_ = 0;
    }
    // The whole file: what the kernel read ahead past the last ranges read,
    // and the folios around them, are outside their bounds.
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
