// Open file descriptors: every local store keeps its file open while
// mounted, so the store directory decides how many the daemon needs. A
// daemon short of them must say so before mounting: past the limit the
// scan took stores for damaged files and libfuse then failed with "failed
// to open /dev/fuse: Too many open files".
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

// Raises the soft RLIMIT_NOFILE to the hard limit, as many servers do: the
// default soft limit (1024) protects select(2) users, which the daemon is not.
void raise_open_file_limit();

// Descriptors open in this process now.
size_t open_descriptor_count();

// When `needed` descriptors (for `stores` store files of `store_dir`) are
// more than the soft limit allows: the message saying so, with the numbers
// and how to raise the limit.
std::optional<std::string> descriptor_shortage(const std::string& store_dir, size_t stores, size_t needed);

}  // namespace ptwmfs
