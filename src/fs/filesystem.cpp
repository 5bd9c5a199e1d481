#include "filesystem.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "log.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/remote/http_client.hpp"

namespace ptwmfs {

struct OpenFile {
    explicit OpenFile(const Node& n) : node(n) {}
    const Node& node;
    UniqueFd fd;            // a local tree's plain files: the file in the store directory
    AccessPattern pattern;  // stores: for decode-ahead
};

Filesystem::Filesystem(const Tree& tree, ptwm::ChunkCache& cache, IndexCache& indexes, Prefetcher& prefetcher)
    : tree_(tree), cache_(cache), indexes_(indexes), prefetcher_(prefetcher) {}

Filesystem::~Filesystem() = default;

OpenFile* Filesystem::keep_open(std::unique_ptr<OpenFile> file) {
    OpenFile* raw = file.get();
    std::lock_guard lock(open_files_mutex_);
    open_files_.emplace(raw, std::move(file));
    return raw;
}

void Filesystem::release(OpenFile* file) {
    std::unique_ptr<OpenFile> owned;  // destroyed (its fd closed) after the lock is dropped
    {
        std::lock_guard lock(open_files_mutex_);
        auto it = open_files_.find(file);
        if (it == open_files_.end()) return;
        owned = std::move(it->second);
        open_files_.erase(it);
    }
}

int Filesystem::shared_fd(const Node& node) {
    std::lock_guard lock(shared_fds_mutex_);
    auto it = shared_fds_.find(node.ino);
    if (it != shared_fds_.end()) return it->second.get();
    UniqueFd fd = tree_.open_regular(node);
    if (!fd) return -1;
    return shared_fds_.emplace(node.ino, std::move(fd)).first->second.get();
}

AccessPattern& Filesystem::stream_pattern(const Node& node, uint64_t offset, uint64_t length) {
    // As the prefetcher's: readahead requests arrive out of order.
    const uint64_t kSlack = prefetcher_.reorder_slack();
    std::lock_guard lock(streams_mutex_);
    auto& set = streams_[node.ino];
    if (!set) set = std::make_unique<StreamSet>();
    size_t pick = StreamSet::kStreams;
    for (size_t i = 0; i < StreamSet::kStreams && pick == StreamSet::kStreams; ++i) {
        if (set->last_used[i] != 0 && offset + kSlack >= set->next_offset[i] && offset <= set->next_offset[i] + kSlack)
            pick = i;
    }
    const bool continues = pick != StreamSet::kStreams;
    if (!continues) {
        pick = 0;
        for (size_t i = 1; i < StreamSet::kStreams; ++i)
            if (set->last_used[i] < set->last_used[pick]) pick = i;
    }
    set->last_used[pick] = ++set->clock;
    set->next_offset[pick] = continues ? std::max(set->next_offset[pick], offset + length) : offset + length;
    return set->patterns[pick];
}

void Filesystem::set_kernel_readahead(std::string mountpoint, uint64_t bytes, bool required) {
    mountpoint_ = std::move(mountpoint);
    kernel_readahead_ = bytes;
    kernel_readahead_required_ = required;
    kernel_readahead_pending_.store(bytes > 0, std::memory_order_relaxed);
}

void Filesystem::write_kernel_readahead() {
    kernel_readahead_pending_.store(false, std::memory_order_relaxed);
    // Our mount's device number, from mountinfo: a stat of the mount point
    // would be a request to ourselves. The backing device info of a FUSE
    // mount is named after it.
    std::string device;
    if (FILE* f = fopen("/proc/self/mountinfo", "r")) {
        char line[4096];
        while (fgets(line, sizeof line, f) != nullptr) {
            char dev[64], point[2048];
            if (sscanf(line, "%*s %*s %63s %*s %2047s", dev, point) == 2 && mountpoint_ == point) device = dev;
        }
        fclose(f);
    }
    const std::string path = "/sys/class/bdi/" + device + "/read_ahead_kb";
    FILE* f = device.empty() ? nullptr : fopen(path.c_str(), "w");
    if (f == nullptr || fprintf(f, "%llu\n", static_cast<unsigned long long>(kernel_readahead_ >> 10)) < 0 ||
        fclose(f) != 0) {
        const int error = errno;
        const char* what = device.empty() ? "(mount not found in mountinfo)" : path.c_str();
        if (kernel_readahead_required_) {
            log_error("kernel_readahead: cannot set %s: %s", what, strerror(error));
        } else {
            log_info("kernel read-ahead stays at the kernel's default (128K): cannot set %s: %s", what,
                     strerror(error));
        }
        return;
    }
}

namespace {

// The store is immutable while mounted: the kernel may keep names and
// attributes, including negative lookups, for as long as it likes.
constexpr double kForever = 365.0 * 24 * 3600;
constexpr std::string_view kStatsXattr = "user.ptwmfs.stats";
// The stats grow between a size query and the read that follows it, so the
// size query answers with this much room to spare.
constexpr size_t kStatsSizeSlack = 256;

Filesystem& fs_of(fuse_req_t req) { return *static_cast<Filesystem*>(fuse_req_userdata(req)); }

OpenFile& open_file_of(const fuse_file_info* fi) { return *reinterpret_cast<OpenFile*>(fi->fh); }

void op_init(void* userdata, fuse_conn_info* conn) {
    // Files open without a round trip to us where the kernel allows it
    // (see Filesystem::stateless_open). Its default for such opens is
    // keep_cache, as we would answer.
    static_cast<Filesystem*>(userdata)->set_stateless_open((conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) != 0);
    // libfuse's default max_write (1 MiB, its buffer size) also sets the
    // kernel's max_pages, which allows read requests of up to 1 MiB:
    // fewer, larger requests make sequential reads much faster.
    if (conn->capable & FUSE_CAP_CACHE_SYMLINKS) conn->want |= FUSE_CAP_CACHE_SYMLINKS;
    // Nothing changes under us: no need to drop cached pages when an
    // attribute refresh would show a new mtime.
    conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
    fs_of(req).apply_kernel_readahead();
    const Tree& tree = fs_of(req).tree();
    const Node* dir = tree.node(parent);
    if (dir == nullptr || dir->kind != NodeKind::directory) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    fuse_entry_param entry{};
    entry.attr_timeout = kForever;
    entry.entry_timeout = kForever;
    if (const Node* child = tree.lookup(*dir, name)) {
        entry.ino = child->ino;
        entry.attr = child->attr;
    }
    fuse_reply_entry(req, &entry);  // ino 0: a negative entry, cached as long
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
    fs_of(req).apply_kernel_readahead();
    const Node* node = fs_of(req).tree().node(ino);
    if (node == nullptr) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    fuse_reply_attr(req, &node->attr, kForever);
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
    const Node* node = fs_of(req).tree().node(ino);
    if (node == nullptr || node->kind != NodeKind::symlink) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    fuse_reply_readlink(req, node->link_target.c_str());
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    const Node* node = fs_of(req).tree().node(ino);
    if (node == nullptr || node->kind != NodeKind::directory) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    fi->cache_readdir = 1;
    fi->keep_cache = 1;
    fuse_reply_open(req, fi);
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info*) {
    const Tree& tree = fs_of(req).tree();
    const Node* dir = tree.node(ino);
    if (dir == nullptr || dir->kind != NodeKind::directory) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    // Entry i of ".", "..", children...; an entry's offset is its successor's index.
    std::vector<char> buffer(size);
    size_t used = 0;
    const size_t count = 2 + dir->children.size();
    for (size_t i = static_cast<size_t>(offset); i < count; ++i) {
        const Node& entry = i == 0 ? *dir : i == 1 ? *tree.node(dir->parent) : *tree.node(dir->children[i - 2]);
        const char* name = i == 0 ? "." : i == 1 ? ".." : entry.name.c_str();
        const size_t needed = fuse_add_direntry(req, buffer.data() + used, size - used, name, &entry.attr,
                                                static_cast<off_t>(i + 1));
        if (needed > size - used) break;
        used += needed;
    }
    fuse_reply_buf(req, buffer.data(), used);
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    Filesystem& fs = fs_of(req);
    const Node* node = fs.tree().node(ino);
    if (node == nullptr) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    if (node->kind == NodeKind::directory) {
        fuse_reply_err(req, EISDIR);
        return;
    }
    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
        fuse_reply_err(req, EROFS);
        return;
    }
    if (fs.stateless_open()) {
        // Success, and no more opens or releases for this connection: the
        // read-only mount makes the kernel refuse writable opens itself.
        fuse_reply_err(req, ENOSYS);
        return;
    }
    auto open_file = std::make_unique<OpenFile>(*node);
    if (node->kind == NodeKind::regular && !node->remote_file) {
        open_file->fd = fs.tree().open_regular(*node);
        if (!open_file->fd) {
            fuse_reply_err(req, errno);
            return;
        }
    }
    // Keep the page cache across opens: the contents never change. No
    // direct_io: it would break shared mmap.
    fi->keep_cache = 1;
    OpenFile* kept = fs.keep_open(std::move(open_file));
    fi->fh = reinterpret_cast<uint64_t>(kept);
    if (fuse_reply_open(req, fi) != 0) fs.release(kept);  // else freed in op_release or at exit
}

void read_plain(fuse_req_t req, Filesystem& fs, int fd, size_t size, off_t offset) {
    if (fd < 0) {
        ++fs.read_stats().errors;
        fuse_reply_err(req, errno);
        return;
    }
    thread_local std::vector<uint8_t> buffer;
    if (buffer.size() < size) buffer.resize(size);
    ssize_t got;
    do {
        got = pread(fd, buffer.data(), size, offset);
    } while (got < 0 && errno == EINTR);
    if (got < 0) {
        ++fs.read_stats().errors;
        fuse_reply_err(req, errno);
        return;
    }
    fs.read_stats().bytes += static_cast<uint64_t>(got);
    fuse_reply_buf(req, reinterpret_cast<const char*>(buffer.data()), static_cast<size_t>(got));
}

void read_remote_plain(fuse_req_t req, Filesystem& fs, const RemotePlainFile& file, size_t size, off_t offset) {
    thread_local std::vector<uint8_t> buffer;
    if (buffer.size() < size) buffer.resize(size);
    size_t got = 0;
    try {
        got = file.read(static_cast<uint64_t>(offset), {buffer.data(), size});
    } catch (const ptwm::remote::ObjectChanged&) {
        ++fs.read_stats().errors;  // the remote stage logged it, once for the object
        fuse_reply_err(req, EIO);
        return;
    } catch (const std::exception& e) {
        ++fs.read_stats().errors;
        log_error("%s: read of %zu bytes at %lld failed: %s", file.name().c_str(), size, static_cast<long long>(offset),
                  e.what());
        fuse_reply_err(req, EIO);
        return;
    }
    fs.read_stats().bytes += got;
    fuse_reply_buf(req, reinterpret_cast<const char*>(buffer.data()), got);
}

// The most pieces one fuse_reply_iov may carry: libfuse writes them with the
// reply header in front, in one writev(2) of at most IOV_MAX (1024) vectors.
constexpr size_t kMaxReplyPieces = 1023;

void read_store(fuse_req_t req, Filesystem& fs, const Node& node, OpenFile* file, size_t size, off_t offset) {
    const StoreFile& store = *node.store;
    ReadStats& stats = fs.read_stats();
    // Per thread, so its scratch buffer is allocated once per thread.
    thread_local GatheredRead gathered;
    gathered.clear();
    // Loaded on first read (opens may never reach us, see stateless_open),
    // and held until the reply is written so the index cap cannot drop it.
    LoadedStorePtr loaded;
    try {
        loaded = store.load(fs.indexes());
    } catch (const std::exception&) {
        ++stats.errors;  // logged where the load failed
        fuse_reply_err(req, EIO);
        return;
    }
    try {
        store.gather(*loaded, static_cast<uint64_t>(offset), size, fs.cache(), gathered);
    } catch (const ptwm::CorruptData&) {
        ++stats.errors;  // logged once per chunk where it was found
        gathered.clear();
        fuse_reply_err(req, EIO);
        return;
    } catch (const ptwm::remote::ObjectChanged&) {
        ++stats.errors;  // the remote stage logged it, once for the object
        gathered.clear();
        fuse_reply_err(req, EIO);
        return;
    } catch (const std::exception& e) {
        ++stats.errors;
        log_error("%s: read of %zu bytes at %lld failed: %s", store.name().c_str(), size,
                  static_cast<long long>(offset), e.what());
        gathered.clear();
        fuse_reply_err(req, EIO);
        return;
    }
    AccessPattern& pattern = file != nullptr ? file->pattern
                                             : fs.stream_pattern(node, static_cast<uint64_t>(offset), size);
    fs.prefetcher().note_read(pattern, store, loaded, static_cast<uint64_t>(offset), size);

    uint64_t bytes = 0;
    for (const iovec& piece : gathered.pieces) bytes += piece.iov_len;
    stats.bytes += bytes;
    stats.prefix_bytes += gathered.prefix_bytes;
    stats.raw_bytes += gathered.raw_bytes;
    if (gathered.pieces.empty()) {
        fuse_reply_buf(req, nullptr, 0);
    } else if (gathered.pieces.size() > kMaxReplyPieces) {
        // More pieces than one writev(2) to /dev/fuse takes (IOV_MAX, less
        // the reply header libfuse puts first): the write would fail with
        // EINVAL, the request would never be answered and its reader would
        // hang. Many tiny tensors (scalars, per-tensor scales) give one
        // piece each, so copy them into one buffer instead.
        thread_local std::vector<uint8_t> flat;
        flat.resize(static_cast<size_t>(bytes));
        size_t at = 0;
        for (const iovec& piece : gathered.pieces) {
            std::memcpy(flat.data() + at, piece.iov_base, piece.iov_len);
            at += piece.iov_len;
        }
        fuse_reply_buf(req, reinterpret_cast<const char*>(flat.data()), flat.size());
    } else {
        fuse_reply_iov(req, gathered.pieces.data(), static_cast<int>(gathered.pieces.size()));
    }
    // The reply is written: let evicted chunks go now, not at the next read.
    gathered.clear();
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, fuse_file_info* fi) {
    const auto start = std::chrono::steady_clock::now();
    Filesystem& fs = fs_of(req);
    fs.apply_kernel_readahead();
    // No handle (fh 0): the file was opened statelessly, see op_open.
    OpenFile* file = fi->fh != 0 ? &open_file_of(fi) : nullptr;
    const Node* node = file != nullptr ? &file->node : fs.tree().node(ino);
    ++fs.read_stats().reads;
    if (node == nullptr || node->kind == NodeKind::directory) {
        ++fs.read_stats().errors;
        fuse_reply_err(req, node == nullptr ? ENOENT : EISDIR);
        return;
    }
    if (node->store) {
        read_store(req, fs, *node, file, size, offset);
    } else if (node->remote_file) {
        read_remote_plain(req, fs, *node->remote_file, size, offset);
    } else {
        read_plain(req, fs, file != nullptr ? file->fd.get() : fs.shared_fd(*node), size, offset);
    }
    const auto elapsed = std::chrono::steady_clock::now() - start;
    fs.read_stats().latency.record(
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()));
}

void op_release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
    if (fi->fh != 0) fs_of(req).release(&open_file_of(fi));
    fuse_reply_err(req, 0);
}

void op_statfs(fuse_req_t req, fuse_ino_t) {
    struct statvfs st {};
    if (fstatvfs(fs_of(req).tree().root_fd(), &st) != 0) {
        fuse_reply_err(req, errno);
        return;
    }
    fuse_reply_statfs(req, &st);
}

// Answers an xattr request for `value` ("" for none) following the
// getxattr/listxattr size protocol: size 0 asks for the length.
void reply_xattr_value(fuse_req_t req, std::string_view value, size_t size, size_t size_slack) {
    if (size == 0) {
        fuse_reply_xattr(req, value.empty() ? 0 : value.size() + size_slack);
    } else if (size < value.size()) {
        fuse_reply_err(req, ERANGE);
    } else {
        fuse_reply_buf(req, value.data(), value.size());
    }
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
    if (ino != FUSE_ROOT_ID || name != kStatsXattr) {
        fuse_reply_err(req, ENODATA);
        return;
    }
    reply_xattr_value(req, fs_of(req).stats_json(), size, kStatsSizeSlack);
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
    // Names are NUL-terminated in the list, so keep the terminator.
    static const std::string root_names(kStatsXattr.data(), kStatsXattr.size() + 1);
    reply_xattr_value(req, ino == FUSE_ROOT_ID ? std::string_view(root_names) : std::string_view(), size, 0);
}

// Every modifying operation. The mount is read-only, so the kernel refuses
// most of these itself; this covers whatever reaches us anyway.
constexpr auto refuse = [](fuse_req_t req, auto...) { fuse_reply_err(req, EROFS); };

fuse_lowlevel_ops make_operations() {
    fuse_lowlevel_ops ops{};
    ops.init = op_init;
    ops.lookup = op_lookup;
    ops.getattr = op_getattr;
    ops.readlink = op_readlink;
    ops.opendir = op_opendir;
    ops.readdir = op_readdir;
    ops.open = op_open;
    ops.read = op_read;
    ops.release = op_release;
    ops.statfs = op_statfs;
    ops.getxattr = op_getxattr;
    ops.listxattr = op_listxattr;

    ops.setattr = refuse;
    ops.mknod = refuse;
    ops.mkdir = refuse;
    ops.unlink = refuse;
    ops.rmdir = refuse;
    ops.symlink = refuse;
    ops.rename = refuse;
    ops.link = refuse;
    ops.write = refuse;
    ops.create = refuse;
    ops.setxattr = refuse;
    ops.removexattr = refuse;
    ops.fallocate = refuse;
    return ops;
}

}  // namespace

const fuse_lowlevel_ops& Filesystem::operations() {
    static const fuse_lowlevel_ops ops = make_operations();
    return ops;
}

std::string Filesystem::stats_json() const {
    return ptwmfs::stats_json(cache_.stats(), indexes_.stats(), read_stats_, prefetcher_.stats());
}

}  // namespace ptwmfs
