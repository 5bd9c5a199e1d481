#include "ptwm/remote/disk_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>

#include "ptwm/base/checksum.hpp"
#include "ptwm/base/error.hpp"

namespace ptwm::remote {
namespace {

namespace fs = std::filesystem;

// Entry file: this header, the key, the payload. `header_sum` covers the
// header's other fields and the key; `payload_sum` the payload.
struct EntryHeader {
    char magic[8];  // "PTWMDC01"
    uint64_t key_length;
    uint64_t payload_length;
    uint64_t payload_sum;
    uint64_t header_sum;
};
constexpr char kMagic[8] = {'P', 'T', 'W', 'M', 'D', 'C', '0', '1'};
constexpr const char* kSuffix = ".entry";

uint64_t header_checksum(const EntryHeader& h, const std::string& key) {
    std::vector<uint8_t> bytes(offsetof(EntryHeader, header_sum) + key.size());
    std::memcpy(bytes.data(), &h, offsetof(EntryHeader, header_sum));
    std::memcpy(bytes.data() + offsetof(EntryHeader, header_sum), key.data(), key.size());
    return xxh3(bytes);
}

bool read_all(int fd, uint8_t* out, size_t n) {
    size_t done = 0;
    while (done < n) {
        const ssize_t r = ::read(fd, out + done, n - done);
        if (r <= 0) return false;
        done += static_cast<size_t>(r);
    }
    return true;
}

bool write_all(int fd, const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w <= 0) return false;
        p += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

}  // namespace

// Bytes of entries dropped from the directory: this process's count of the
// bytes held follows them (a damaged entry removed, an entry written over).
void DiskCache::release(uint64_t bytes) {
    uint64_t used = used_.load();
    while (!used_.compare_exchange_weak(used, used > bytes ? used - bytes : 0)) {
    }
    stats_->cache_bytes = used_.load();
}

std::string default_disk_cache_dir() {
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/ptwmfs";
    const char* home = std::getenv("HOME");
    return std::string(home && *home ? home : "/tmp") + "/.cache/ptwmfs";
}

DiskCache::DiskCache(DiskCacheOptions options, std::shared_ptr<RemoteStats> stats)
    : options_(std::move(options)), stats_(std::move(stats)) {
    std::error_code ec;
    fs::create_directories(options_.dir, ec);
    if (ec || !fs::is_directory(options_.dir))
        throw Error(options_.dir + ": cannot make the disk cache directory: " + ec.message());
    uint64_t used = 0;
    for (const auto& e : fs::directory_iterator(options_.dir, ec))
        if (e.path().extension() == kSuffix) used += e.file_size(ec);
    used_ = used;
    stats_->cache_bytes = used;
}

std::string DiskCache::path_of(const std::string& key) const {
    char name[40];
    std::snprintf(name, sizeof name, "%016llx%s", static_cast<unsigned long long>(xxh3(key.data(), key.size())), kSuffix);
    return options_.dir + "/" + name;
}

bool DiskCache::probably_has(const std::string& key) const {
    struct stat st {};
    return ::stat(path_of(key).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::optional<std::vector<uint8_t>> DiskCache::get(const std::string& key) {
    const std::string path = path_of(key);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        stats_->cache_misses.fetch_add(1, std::memory_order_relaxed);
        return std::nullopt;
    }
    EntryHeader h{};
    std::string stored_key;
    std::vector<uint8_t> payload;
    struct stat st{};
    bool good = ::fstat(fd, &st) == 0 && read_all(fd, reinterpret_cast<uint8_t*>(&h), sizeof h) &&
                std::memcmp(h.magic, kMagic, sizeof kMagic) == 0 && h.key_length == key.size() &&
                static_cast<uint64_t>(st.st_size) == sizeof h + h.key_length + h.payload_length;
    if (good) {
        stored_key.resize(h.key_length);
        good = read_all(fd, reinterpret_cast<uint8_t*>(stored_key.data()), stored_key.size()) && stored_key == key &&
               header_checksum(h, stored_key) == h.header_sum;
    }
    if (good) {
        payload.resize(h.payload_length);
        good = read_all(fd, payload.data(), payload.size()) && xxh3(payload) == h.payload_sum;
    }
    ::close(fd);
    if (!good) {
        // Torn, damaged, or another key's entry under a colliding name: never served.
        if ((stored_key.empty() || stored_key == key) && ::unlink(path.c_str()) == 0) release(static_cast<uint64_t>(st.st_size));
        stats_->cache_rejected.fetch_add(1, std::memory_order_relaxed);
        stats_->cache_misses.fetch_add(1, std::memory_order_relaxed);
        return std::nullopt;
    }
    ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // mtime = last use, for LRU eviction
    stats_->cache_hits.fetch_add(1, std::memory_order_relaxed);
    return payload;
}

void DiskCache::erase(const std::string& key) {
    const std::string path = path_of(key);
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && ::unlink(path.c_str()) == 0) release(static_cast<uint64_t>(st.st_size));
}

void DiskCache::put(const std::string& key, std::span<const uint8_t> bytes) {
    thread_local std::minstd_rand rng(std::random_device{}());
    const std::string path = path_of(key);
    const std::string temp = options_.dir + "/.tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rng());
    EntryHeader h{};
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    h.key_length = key.size();
    h.payload_length = bytes.size();
    h.payload_sum = xxh3(bytes);
    h.header_sum = header_checksum(h, key);
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return;
    const bool ok = write_all(fd, &h, sizeof h) && write_all(fd, key.data(), key.size()) &&
                    write_all(fd, bytes.data(), bytes.size());
    ::close(fd);
    struct stat replaced {};  // an entry written over (the same block fetched twice at once, or again)
    const bool replacing = ::stat(path.c_str(), &replaced) == 0;
    if (!ok || ::rename(temp.c_str(), path.c_str()) != 0) {
        ::unlink(temp.c_str());
        return;
    }
    const uint64_t size = sizeof h + key.size() + bytes.size();
    stats_->cache_bytes = used_.fetch_add(size) + size;
    if (replacing) release(static_cast<uint64_t>(replaced.st_size));
    evict_if_full();
}

void DiskCache::evict_if_full() {
    if (used_.load() <= options_.max_bytes) return;
    static std::mutex evicting;
    std::unique_lock lock(evicting, std::try_to_lock);
    if (!lock.owns_lock()) return;  // another thread is at it
    struct Entry {
        fs::file_time_type used;
        uint64_t size;
        fs::path path;
    };
    std::vector<Entry> entries;
    std::error_code ec;
    uint64_t total = 0;
    for (const auto& e : fs::directory_iterator(options_.dir, ec)) {
        if (e.path().extension() != kSuffix) continue;
        const uint64_t size = e.file_size(ec);
        if (ec) continue;
        entries.push_back({e.last_write_time(ec), size, e.path()});
        total += size;
    }
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
    const uint64_t target = options_.max_bytes - options_.max_bytes / 10;  // some room before the next scan
    for (const auto& e : entries) {
        if (total <= target) break;
        if (fs::remove(e.path, ec)) {
            total -= e.size;
            stats_->cache_evictions.fetch_add(1, std::memory_order_relaxed);
        }
    }
    used_ = total;
    stats_->cache_bytes = total;
}

}  // namespace ptwm::remote
