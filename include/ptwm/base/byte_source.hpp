// Where a store's bytes come from. The store reader needs only "fill this
// buffer from offset O" and the object's size; a local file is one source,
// and an object store (HTTP range reads behind a disk cache) can be another,
// without the reader, the chunk cache or the daemon knowing which.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "ptwm/base/file_io.hpp"

namespace ptwm {

class ByteSource {
public:
    virtual ~ByteSource() = default;
    // The name messages give: a path or a URL.
    virtual const std::string& name() const = 0;
    // The object's size in bytes, fixed for the source's life.
    virtual uint64_t size() const = 0;
    // Fill `out` from `offset` up to the end of the object; returns the bytes
    // read (fewer only at the end). Throws Error naming the object and offset
    // on an I/O failure. Safe to call from several threads at once.
    virtual size_t read_up_to(uint64_t offset, std::span<uint8_t> out) const = 0;
    // Fill `out` from `offset` or throw Error (truncated, or an I/O failure).
    void read_exact(uint64_t offset, std::span<uint8_t> out) const;
    // Bytes of [offset, offset + length) found wrong (a checksum failed):
    // drops every copy this source keeps of them, so that the next read
    // fetches them anew, and says whether it kept any. A local file keeps
    // none: its bytes are what they are.
    virtual bool forget(uint64_t offset, uint64_t length) const {
        (void)offset, (void)length;
        return false;
    }
};

// What reading a local store leaves in the kernel's page cache. A mount
// serves decoded bytes that the kernel caches as the file it shows; keeping
// the compressed store's pages as well would cache every byte about 1.7
// times over (issue 11). The tool, reading each store once, does not care.
enum class PageCachePolicy {
    keep,  // plain pread with the kernel's read-ahead: pages stay cached
    drop,  // the same, then POSIX_FADV_DONTNEED of what was read, in spans
           // of a few MiB (see LocalFileSource::drop_read_pages)
    direct,  // O_DIRECT reads of the aligned blocks around each range: no
             // page cache and no kernel read-ahead at all
};
std::optional<PageCachePolicy> parse_page_cache_policy(std::string_view text);
const char* name(PageCachePolicy policy);

// The policy LocalFileSource::open uses when given none: keep, unless a
// program (the daemon) sets another once at start, before opening stores.
PageCachePolicy default_page_cache_policy();
void set_default_page_cache_policy(PageCachePolicy policy);

// A local file read with pread.
class LocalFileSource final : public ByteSource {
public:
    LocalFileSource(File file, PageCachePolicy policy);
    ~LocalFileSource() override;
    static std::unique_ptr<LocalFileSource> open(const std::string& path);
    static std::unique_ptr<LocalFileSource> open(const std::string& path, PageCachePolicy policy);
    const std::string& name() const override { return file_.path(); }
    uint64_t size() const override { return size_; }
    size_t read_up_to(uint64_t offset, std::span<uint8_t> out) const override;
    const File& file() const { return file_; }
    PageCachePolicy policy() const { return policy_; }
    // Policy drop: drops all the file's pages once no read has come for
    // `idle`, if any came since the last such drop. The ranges read drop
    // each time drop_every_ bytes were read (drop_read_pages); those of the
    // last stretch never do, nor does the kernel's read-ahead past them, so
    // a reader that stops would leave them cached for good. A daemon calls
    // this now and then.
    void drop_pages_if_idle(std::chrono::steady_clock::time_point now, std::chrono::steady_clock::duration idle) const;

private:
    size_t read_direct(uint64_t offset, std::span<uint8_t> out) const;
    void drop_read_pages(uint64_t offset, size_t length) const;

    File file_;
    uint64_t size_;
    PageCachePolicy policy_;
    int direct_fd_ = -1;  // the file opened again with O_DIRECT (policy direct)
    // Policy drop: the ranges read (merged, begin -> end) since their pages
    // were last dropped, and how many bytes were read since then.
    mutable std::mutex drop_mutex_;
    struct ReadRange {
        uint64_t end;
        bool fresh;  // read since the last drop
    };
    mutable std::map<uint64_t, ReadRange> read_ranges_;
    mutable uint64_t read_since_drop_ = 0;
    mutable bool read_since_idle_drop_ = false;
    mutable std::chrono::steady_clock::time_point last_read_;
    uint64_t drop_every_ = 0;
};

}  // namespace ptwm
