// Open file descriptors: every local store keeps its file open while
// mounted, so the store directory decides how many the daemon needs; with
// -o clone_fd every FUSE thread opens /dev/fuse again, and the requests of
// an s3:// or https:// mount keep connections open. A daemon short of them
// must say so before mounting: past the limit the scan took stores for
// damaged files and libfuse then failed with "failed to open /dev/fuse:
// Too many open files"; clone_fd's threads carried on without theirs, and
// requests failed.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace ptwmfs {

// What the daemon opens besides its stores: /dev/fuse, fusermount3's
// socket (kept with auto_unmount), syslog, the mount's read_ahead_kb, and
// the plain files (config, tokenizer) readers have open through the mount.
// A floor with room to spare, not a bound: readers can open more.
constexpr size_t kDescriptorsBesideStores = 32;

// What the daemon will have open at most, by what for: the check adds the
// parts up, and its message names them.
struct DescriptorNeeds {
    // Open now (standard streams, ready_fd) and kept by the tree: the store
    // directory and every local store's file (twice with page_cache=direct).
    size_t held = 0;
    // -o clone_fd: a /dev/fuse of its own for each FUSE thread (up to
    // max_threads; none with -s).
    size_t clone_fd = 0;
    // s3:// and https://: the threads that make requests, each keeping its
    // connection alive between them (HttpClient's handle pool grows to as
    // many as make requests at once) and having a disk-cache file open
    // while it reads or stores a block. Background fetches (0 with
    // fetch_ahead=0), FUSE threads (1 with -s) and decode-ahead workers.
    size_t fetch_connections = 0, fuse_threads = 0, workers = 0;
    static constexpr size_t kPerRequestingThread = 2;

    size_t requests() const { return kPerRequestingThread * (fetch_connections + fuse_threads + workers); }
    size_t total() const { return held + clone_fd + requests() + kDescriptorsBesideStores; }
};

// Raises the soft RLIMIT_NOFILE to the hard limit, as many servers do: the
// default soft limit (1024) protects select(2) users, which the daemon is not.
void raise_open_file_limit();

// Descriptors open in this process now.
size_t open_descriptor_count();

// When the descriptors `needs` adds up to (for `stores` store files of the
// local `store_dir`) are more than the soft limit allows: the message
// saying so, with the numbers and how to raise the limit.
std::optional<std::string> descriptor_shortage(const std::string& store_dir, size_t stores,
                                               const DescriptorNeeds& needs);

// The same for an s3:// or https:// mount of `url`, whose stores hold no
// descriptors: its requests' do.
std::optional<std::string> remote_descriptor_shortage(const std::string& url, const DescriptorNeeds& needs);

}  // namespace ptwmfs
