// Command line of the daemon: `ptwmfs STORE_DIR MOUNTPOINT [-o OPTIONS]`,
// the form mount.fuse3 uses for /etc/fstab entries and `mount -t fuse.ptwmfs`.
#pragma once

#include <fuse_lowlevel.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ptwm/base/byte_source.hpp"

namespace ptwmfs {

struct Options {
    std::string store_dir;                   // absolute, symlinks resolved
    uint64_t cache_size = 256ull << 20;      // -o cache_size=SIZE
    // -o index_cache=SIZE: the bound on loaded stores' header bytes, tensor
    // tables and chunk indexes (IndexCache). 256M holds the indexes of about
    // 9 million two-plane chunks (30 B each: 2.2 TB of weights in 256 KiB
    // chunks), or about 32 shards of 37,700 tensors (7.9 MB each: 5.5 MB of
    // header bytes, 1.2 MB tensor table, 1.2 MB index): a model of 500 GB
    // reads without reloads, yet a daemon serving a directory of many
    // models stays bounded. It matches cache_size's default.
    uint64_t index_cache = 256ull << 20;
    unsigned workers = 0;                    // -o workers=N (decode-ahead threads)
    uint64_t readahead = 8ull << 20;         // -o readahead=SIZE (decode-ahead window)
    int ready_fd = -1;                       // -o ready_fd=N
    ptwm::PageCachePolicy page_cache = ptwm::PageCachePolicy::drop;  // -o page_cache=keep|drop|direct
    // -o kernel_readahead=SIZE (0: leave the kernel's 128K). 1M by default:
    // the kernel then sends 1 MiB read requests (max_pages) and keeps one
    // in flight ahead of a sequential reader.
    uint64_t kernel_readahead = 1ull << 20;
    bool kernel_readahead_given = false;     // set explicitly: failing to apply it is an error
    bool print_stats = false;                // -o stats
    // s3:// and https:// stores (store_dir is then the URL as given).
    bool remote = false;
    std::string disk_cache;                  // -o disk_cache=DIR (default under $XDG_CACHE_HOME)
    uint64_t disk_cache_size = 4ull << 30;   // -o disk_cache_size=SIZE
    std::optional<std::string> s3_endpoint, region, profile;  // -o s3_endpoint=, region=, profile=
    double remote_timeout = 60;              // -o remote_timeout=SECONDS
    uint64_t fetch_ahead = 16ull << 20;      // -o fetch_ahead=SIZE (0: no fetch-ahead)
    unsigned fetch_connections = 8;          // -o fetch_connections=N
    fuse_cmdline_opts fuse{};                // -f, -d, -s, mountpoint, ...
};

enum class ParseOutcome { run, exit_success, exit_failure };

// Parses argv into `options`, leaving in `args` what fuse_session_new takes
// (with ro, default_permissions, fsname and subtype added). Prints --help,
// --version and errors itself.
ParseOutcome parse_options(fuse_args& args, Options& options);


}  // namespace ptwmfs
