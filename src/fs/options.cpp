#include "options.hpp"

#include <zstd.h>

#include <cerrno>
#include <algorithm>
#include <cctype>
#include <cstdarg>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <cstdlib>
#include <memory>
#include <utility>

#include <fcntl.h>
#include <fuse_log.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ptwm/base/parallel.hpp"
#include "ptwm/remote/remote_url.hpp"
#include "ptwm/base/size_text.hpp"
#include "ptwmfs_version.h"

namespace ptwmfs {
namespace {

// Keys of the options take_argument looks at itself.
enum OptionKey { kKeyReadWrite = 1, kKeyReadOnly, kKeyMountName };

// What fuse_opt_parse fills; converted into Options afterwards. Numbers
// are taken as text too: fuse_opt's %d reads "2x" as 2 and "1e3" as 1,
// and wraps 99999999999 around.
struct RawOptions {
    char* cache_size = nullptr;
    char* index_cache = nullptr;
    char* readahead = nullptr;
    char* page_cache = nullptr;
    char* kernel_readahead = nullptr;
    char* workers = nullptr;
    char* ready_fd = nullptr;
    int stats = 0;
    char* store_dir = nullptr;
    char* disk_cache = nullptr;
    char* disk_cache_size = nullptr;
    char* s3_endpoint = nullptr;
    char* region = nullptr;
    char* profile = nullptr;
    char* remote_timeout = nullptr;
    char* fetch_ahead = nullptr;
    char* fetch_connections = nullptr;
    // The last of -o rw and -o ro, as mount(8) takes them: the mount is
    // always ro, and rw gets a notice (mount(8) passes rw unless told ro,
    // so fstab entries and `mount -t` without ro must still mount).
    bool read_write = false;
    // A subtype= or fsname= given: the daemon sets both, and the given
    // one was overridden, or passed to fusermount3 beside the daemon's.
    char* mount_name = nullptr;
};

#define PTWMFS_OPT(templ, member, value) {templ, offsetof(RawOptions, member), value}
const fuse_opt kOptionSpec[] = {
    PTWMFS_OPT("cache_size=%s", cache_size, 0),
    PTWMFS_OPT("index_cache=%s", index_cache, 0),
    PTWMFS_OPT("readahead=%s", readahead, 0),
    PTWMFS_OPT("page_cache=%s", page_cache, 0),
    PTWMFS_OPT("kernel_readahead=%s", kernel_readahead, 0),
    PTWMFS_OPT("workers=%s", workers, 0),
    PTWMFS_OPT("ready_fd=%s", ready_fd, 0),
    PTWMFS_OPT("stats", stats, 1),
    PTWMFS_OPT("disk_cache=%s", disk_cache, 0),
    PTWMFS_OPT("disk_cache_size=%s", disk_cache_size, 0),
    PTWMFS_OPT("s3_endpoint=%s", s3_endpoint, 0),
    PTWMFS_OPT("region=%s", region, 0),
    PTWMFS_OPT("profile=%s", profile, 0),
    PTWMFS_OPT("remote_timeout=%s", remote_timeout, 0),
    PTWMFS_OPT("fetch_ahead=%s", fetch_ahead, 0),
    PTWMFS_OPT("fetch_connections=%s", fetch_connections, 0),
    FUSE_OPT_KEY("rw", kKeyReadWrite),
    FUSE_OPT_KEY("ro", kKeyReadOnly),
    FUSE_OPT_KEY("subtype=", kKeyMountName),
    FUSE_OPT_KEY("fsname=", kKeyMountName),
    FUSE_OPT_END,
};
#undef PTWMFS_OPT

// The first non-option argument is the store directory; the second, the
// mount point, stays for fuse_parse_cmdline. rw and ro are noted and
// dropped: parse_options adds ro itself.
int take_argument(void* data, const char* arg, int key, fuse_args*) {
    auto* raw = static_cast<RawOptions*>(data);
    switch (key) {
        case kKeyReadWrite: raw->read_write = true; return 0;
        case kKeyReadOnly: raw->read_write = false; return 0;
        case kKeyMountName:
            if (raw->mount_name == nullptr) raw->mount_name = strdup(arg);
            return 0;
        case FUSE_OPT_KEY_NONOPT:
            if (raw->store_dir != nullptr) return 1;
            raw->store_dir = strdup(arg);
            return 0;
        default: return 1;
    }
}

void print_usage(const char* program) {
    printf(
        "usage: %s STORE_DIR|NAME.ptwm MOUNTPOINT [options]\n"
        "\n"
        "Serves a directory made by `ptwmfs-tool pack` as the original model\n"
        "directory, read-only: every NAME.ptwm store appears as NAME (-o rw is\n"
        "mounted read-only too, with a notice). A single store NAME.ptwm is shown\n"
        "as a directory holding NAME alone.\n"
        "\n"
        "ptwmfs options:\n"
        "    -o cache_size=SIZE     decoded-chunk cache, bytes with K/M/G suffix (256M)\n"
        "    -o index_cache=SIZE    stores' headers and chunk indexes kept loaded; the least\n"
        "                           recently read beyond it are dropped, reloaded on use (256M)\n"
        "    -o workers=N           decode-ahead threads, 0-1024 (number of cores; 0: none)\n"
        "    -o readahead=SIZE      decode-ahead window of sequential readers (8M; 0: off)\n"
        "    -o page_cache=POLICY   what reading stores leaves in the page cache: drop\n"
        "                           (default: pages dropped once read), direct (O_DIRECT)\n"
        "                           or keep\n"
        "    -o kernel_readahead=SIZE  the mount's kernel read-ahead (1M; needs root, else the\n"
        "                           kernel's 128K stays; 0: leave it): whole pages, at most\n"
        "                           2^32 - 1 of them (4K pages: 17179869180K)\n"
        "    -o stats               print statistics to stderr at exit\n"
        "    -o ready_fd=N          write one byte to fd N once mounted, then close it\n"
        "\n"
        "STORE_DIR may be s3://BUCKET/PREFIX or https://HOST/PATH/ (a tree packed there),\n"
        "or such a URL of one store, .../NAME.ptwm:\n"
        "    -o disk_cache=DIR      cache of fetched bytes ($XDG_CACHE_HOME/ptwmfs)\n"
        "    -o disk_cache_size=SIZE  its bound, least recently used evicted first (4G)\n"
        "    -o s3_endpoint=URL     S3 endpoint (default $AWS_ENDPOINT_URL, else AWS)\n"
        "    -o region=R            S3 region (default $AWS_REGION, ~/.aws/config)\n"
        "    -o profile=P           profile of ~/.aws/credentials and config\n"
        "    -o remote_timeout=S    a read retries for up to S seconds, then fails with EIO (60)\n"
        "    -o fetch_ahead=SIZE    fetched ahead of a sequential reader, in the background (16M, at most 1G; 0: none)\n"
        "    -o fetch_connections=N background range GETs in flight at once, 1-1024 (8)\n"
        "\n",
        program);
}

void print_versions() {
    printf("ptwmfs version %s\n", PTWMFS_VERSION);
    printf("libfuse version %s\n", fuse_pkgversion());
    printf("zstd version %s\n", ZSTD_versionString());
    fuse_lowlevel_version();
}

bool size_option(const char* text, const char* name, uint64_t& out) {
    if (text == nullptr) return true;
    auto parsed = ptwm::parse_size(text);
    if (!parsed) {
        fprintf(stderr, "ptwmfs: bad %s '%s': expected bytes with an optional K, M or G suffix\n", name, text);
        return false;
    }
    out = *parsed;
    return true;
}

// A whole decimal number, the whole of `text` (beyond long long: clamped,
// for the range check to refuse with the text as given). No leading space
// or '+', which strtoll would take and the sizes do not; a '-' is left for
// the range checks, whose messages say what the option takes.
bool number_option(const char* text, const char* name, std::optional<long long>& out) {
    if (text == nullptr) return true;
    char* end = nullptr;
    errno = 0;
    const long long value = std::strtoll(text, &end, 10);
    if (end == text || *end != '\0' || std::isspace(static_cast<unsigned char>(*text)) || *text == '+') {
        fprintf(stderr, "ptwmfs: bad %s '%s': expected a whole number\n", name, text);
        return false;
    }
    out = value;
    return true;
}

// -o kernel_readahead: 0, or what the kernel keeps as it is. read_ahead_kb
// takes any number of KiB but keeps whole pages, rounding down (4097 bytes
// would be 4K, 6K 4K again), and each open file takes its copy of the
// window as a 32-bit count of pages: 2^32 pages and more wrap around (16T
// gives 4 KiB reads, no read-ahead at all). Below a page is none either.
bool kernel_readahead_in_range(const char* text, uint64_t bytes) {
    if (text == nullptr || bytes == 0) return true;
    const long page_size = sysconf(_SC_PAGESIZE);
    const uint64_t page = page_size > 0 ? static_cast<uint64_t>(page_size) : 4096;
    const uint64_t most = page * UINT32_MAX;
    if (bytes < page) {
        fprintf(stderr, "ptwmfs: kernel_readahead takes 0 (leave the kernel's) or %lluK and more, not %s\n",
                static_cast<unsigned long long>(page >> 10), text);
        return false;
    }
    if (bytes > most) {
        fprintf(stderr,
                "ptwmfs: kernel_readahead takes at most %lluK (2^32 - 1 pages of %lluK: the kernel counts a file's "
                "read-ahead in 32 bits, and more wraps around), not %s\n",
                static_cast<unsigned long long>(most >> 10), static_cast<unsigned long long>(page >> 10), text);
        return false;
    }
    if (bytes % page != 0) {
        fprintf(stderr,
                "ptwmfs: kernel_readahead takes whole pages, a multiple of %lluK, not %s (the kernel would round it "
                "down to %lluK)\n",
                static_cast<unsigned long long>(page >> 10), text,
                static_cast<unsigned long long>((bytes - bytes % page) >> 10));
        return false;
    }
    return true;
}

// Whether libfuse takes what is left in `args`, its message printed if not.
// fuse_session_new finds unknown options, and serve calls it only after the
// scan: for an s3:// or https:// store after fetching the manifest, whose
// failure then hid them (`-o bogus` with the server down said only that
// the GET failed, a minute later). A session made and dropped finds them
// first. Its debug lines (with -d, the version line) are dropped: the real
// session prints them.
void log_all_but_debug(enum fuse_log_level level, const char* format, va_list args) {
    if (level != FUSE_LOG_DEBUG) vfprintf(stderr, format, args);
}

bool options_libfuse_takes(const fuse_args& args) {
    fuse_args copy = FUSE_ARGS_INIT(0, nullptr);
    bool ok = true;
    for (int i = 0; ok && i < args.argc; ++i) ok = fuse_opt_add_arg(&copy, args.argv[i]) == 0;
    fuse_session* trial = nullptr;
    if (ok) {
        const fuse_lowlevel_ops no_operations{};
        fuse_set_log_func(log_all_but_debug);
        trial = fuse_session_new(&copy, &no_operations, sizeof no_operations, nullptr);
        fuse_set_log_func(nullptr);  // libfuse's own again
    } else {
        fprintf(stderr, "ptwmfs: out of memory\n");
    }
    fuse_opt_free_args(&copy);
    if (trial == nullptr) return false;
    fuse_session_destroy(trial);
    return true;
}

}  // namespace

ParseOutcome parse_options(fuse_args& args, Options& options) {
    RawOptions raw;
    if (fuse_opt_parse(&args, &raw, kOptionSpec, take_argument) != 0) return ParseOutcome::exit_failure;
    std::unique_ptr<char, decltype(&free)> store_dir(raw.store_dir, &free);
    std::unique_ptr<char, decltype(&free)> mount_name(raw.mount_name, &free);
    std::unique_ptr<char, decltype(&free)> cache_size(raw.cache_size, &free);
    std::unique_ptr<char, decltype(&free)> index_cache(raw.index_cache, &free);
    std::unique_ptr<char, decltype(&free)> readahead(raw.readahead, &free);
    std::unique_ptr<char, decltype(&free)> disk_cache(raw.disk_cache, &free), disk_cache_size(raw.disk_cache_size, &free),
        s3_endpoint(raw.s3_endpoint, &free), region(raw.region, &free), profile(raw.profile, &free),
        fetch_ahead(raw.fetch_ahead, &free);
    std::unique_ptr<char, decltype(&free)> page_cache(raw.page_cache, &free);
    std::unique_ptr<char, decltype(&free)> kernel_readahead(raw.kernel_readahead, &free);
    std::unique_ptr<char, decltype(&free)> workers_text(raw.workers, &free), ready_fd_text(raw.ready_fd, &free),
        remote_timeout_text(raw.remote_timeout, &free), fetch_connections_text(raw.fetch_connections, &free);

    // Before fuse_parse_cmdline, which otherwise adds a subtype of its own
    // (the program's basename): fusermount3 was given subtype=ptwmfs twice.
    if (fuse_opt_add_arg(&args, "-osubtype=ptwmfs") != 0) {
        fprintf(stderr, "ptwmfs: out of memory\n");
        return ParseOutcome::exit_failure;
    }
    if (fuse_parse_cmdline(&args, &options.fuse) != 0) return ParseOutcome::exit_failure;
    if (options.fuse.show_help) {
        print_usage(args.argv[0]);
        fuse_cmdline_help();
        fuse_lowlevel_help();
        return ParseOutcome::exit_success;
    }
    if (options.fuse.show_version) {
        print_versions();
        return ParseOutcome::exit_success;
    }
    if (store_dir == nullptr || options.fuse.mountpoint == nullptr) {
        fprintf(stderr, "usage: %s STORE_DIR|NAME.ptwm MOUNTPOINT [options]  (--help for more)\n", args.argv[0]);
        return ParseOutcome::exit_failure;
    }
    if (raw.read_write) {
        // Not refused: mount(8) passes rw unless told ro, and an fstab entry
        // without ro must mount. Said, so that whoever asked for a writable
        // mount does not learn it at the first write.
        fprintf(stderr, "ptwmfs: -o rw: the file system is read-only; mounting it read-only\n");
    }
    if (mount_name) {
        fprintf(stderr, "ptwmfs: -o %s: ptwmfs names its mounts itself (subtype=ptwmfs, fsname=STORE_DIR)\n",
                mount_name.get());
        return ParseOutcome::exit_failure;
    }
    std::optional<long long> workers, ready_fd, remote_timeout, fetch_connections;
    if (!number_option(raw.workers, "workers", workers) || !number_option(raw.ready_fd, "ready_fd", ready_fd) ||
        !number_option(raw.remote_timeout, "remote_timeout", remote_timeout) ||
        !number_option(raw.fetch_connections, "fetch_connections", fetch_connections)) {
        return ParseOutcome::exit_failure;
    }

    // The root we show is a directory: a mount on a file would come up and
    // fail every access with EIO. (/dev/fd/N is a descriptor a privileged
    // mounter opened for us, not a path to look at.)
    struct stat point {};
    const char* mountpoint = options.fuse.mountpoint;
    if (std::strncmp(mountpoint, "/dev/fd/", 8) != 0 && stat(mountpoint, &point) == 0 && !S_ISDIR(point.st_mode)) {
        fprintf(stderr, "ptwmfs: %s: mount point is not a directory\n", mountpoint);
        return ParseOutcome::exit_failure;
    }

    const std::string source = store_dir.get();
    if (const std::string scheme = ptwm::remote::unsupported_url_scheme(source); !scheme.empty()) {
        fprintf(stderr, "ptwmfs: %s: %s:// is not a scheme ptwmfs reads (s3://, https:// and http:// are)\n",
                source.c_str(), scheme.c_str());
        return ParseOutcome::exit_failure;
    }
    // Options that would be ignored, bad values too (fetch_ahead=abc
    // mounted): whoever gave one expected it to do something.
    const auto refused = [&](std::initializer_list<std::pair<const char*, const char*>> given, const char* takers,
                             const std::string& not_this) {
        for (const auto& [name, text] : given) {
            if (text == nullptr) continue;
            fprintf(stderr, "ptwmfs: -o %s=%s: only %s take it, not %s\n", name, text, takers, not_this.c_str());
            return true;
        }
        return false;
    };
    options.remote = ptwm::remote::is_remote_url(source);
    if (options.remote) {
        // An https:// or http:// tree is read unsigned.
        if (!ptwm::remote::parse_remote_url(source)->is_s3() &&
            refused({{"s3_endpoint", raw.s3_endpoint}, {"region", raw.region}, {"profile", raw.profile}},
                    "s3:// stores", source))
            return ParseOutcome::exit_failure;
        options.store_dir = source;
        if (disk_cache) {
            // Absolute even when it does not exist yet: the daemon changes
            // directory to / when it detaches, and a relative path would
            // then name another directory (blocks went nowhere, silently).
            std::unique_ptr<char, decltype(&free)> dir(realpath(disk_cache.get(), nullptr), &free);
            std::error_code ec;
            options.disk_cache = dir ? std::string(dir.get())
                                     : std::filesystem::absolute(disk_cache.get(), ec).lexically_normal().string();
            if (ec) options.disk_cache = disk_cache.get();
        }
        if (!size_option(disk_cache_size.get(), "disk_cache_size", options.disk_cache_size))
            return ParseOutcome::exit_failure;
        if (s3_endpoint) options.s3_endpoint = s3_endpoint.get();
        if (region) options.region = region.get();
        if (profile) options.profile = profile.get();
        if (remote_timeout && (*remote_timeout <= 0 || *remote_timeout > INT_MAX)) {
            fprintf(stderr, "ptwmfs: remote_timeout must be 1 second or more (and at most %d), not %s\n", INT_MAX,
                    raw.remote_timeout);
            return ParseOutcome::exit_failure;
        }
        if (remote_timeout) options.remote_timeout = static_cast<double>(*remote_timeout);
        if (!size_option(fetch_ahead.get(), "fetch_ahead", options.fetch_ahead)) return ParseOutcome::exit_failure;
        // A window is held in memory while its reader catches up, and the
        // process's fetched blocks are bounded at twice one file's most:
        // 100G had set that bound to 214 GB.
        constexpr uint64_t kMaxFetchAhead = 1ull << 30;
        if (options.fetch_ahead > kMaxFetchAhead) {
            fprintf(stderr, "ptwmfs: fetch_ahead takes at most 1G (held in memory while its reader catches up), not %s\n",
                    raw.fetch_ahead);
            return ParseOutcome::exit_failure;
        }
        // Each is a thread of its own (FetchPool), with a connection and a
        // disk-cache file open: as many as workers may have, and counted in
        // the descriptor check (descriptor_limit.hpp).
        if (fetch_connections &&
            (*fetch_connections <= 0 || *fetch_connections > static_cast<long long>(ptwm::kMaxThreads))) {
            fprintf(stderr,
                    "ptwmfs: fetch_connections must be 1 or more (and at most %u, a thread each; fetch_ahead=0 "
                    "turns fetch-ahead off), not %s\n",
                    ptwm::kMaxThreads, raw.fetch_connections);
            return ParseOutcome::exit_failure;
        }
        if (fetch_connections) options.fetch_connections = static_cast<unsigned>(*fetch_connections);
    } else {
        if (refused({{"disk_cache", raw.disk_cache}, {"disk_cache_size", raw.disk_cache_size},
                     {"s3_endpoint", raw.s3_endpoint}, {"region", raw.region}, {"profile", raw.profile},
                     {"remote_timeout", raw.remote_timeout}, {"fetch_ahead", raw.fetch_ahead},
                     {"fetch_connections", raw.fetch_connections}},
                    "s3:// and https:// stores", "the directory " + source))
            return ParseOutcome::exit_failure;
        // Absolute: the daemon changes directory to / when it detaches.
        std::unique_ptr<char, decltype(&free)> resolved(realpath(store_dir.get(), nullptr), &free);
        if (resolved == nullptr) {
            fprintf(stderr, "ptwmfs: %s: %s\n", store_dir.get(), strerror(errno));
            return ParseOutcome::exit_failure;
        }
        options.store_dir = resolved.get();
    }

    if (!size_option(cache_size.get(), "cache_size", options.cache_size) ||
        !size_option(index_cache.get(), "index_cache", options.index_cache) ||
        !size_option(readahead.get(), "readahead", options.readahead) ||
        !size_option(kernel_readahead.get(), "kernel_readahead", options.kernel_readahead)) {
        return ParseOutcome::exit_failure;
    }
    options.kernel_readahead_given = kernel_readahead != nullptr;
    if (!kernel_readahead_in_range(kernel_readahead.get(), options.kernel_readahead)) return ParseOutcome::exit_failure;
    if (options.cache_size == 0) {
        fprintf(stderr, "ptwmfs: cache_size must be larger than 0\n");
        return ParseOutcome::exit_failure;
    }
    if (page_cache != nullptr) {
        auto policy = ptwm::parse_page_cache_policy(page_cache.get());
        if (!policy) {
            fprintf(stderr, "ptwmfs: bad page_cache '%s': expected keep, drop or direct\n", page_cache.get());
            return ParseOutcome::exit_failure;
        }
        options.page_cache = *policy;
    }
    if (workers && (*workers < 0 || *workers > static_cast<long long>(ptwm::kMaxThreads))) {
        fprintf(stderr, "ptwmfs: workers takes 0 to %u, not %s\n", ptwm::kMaxThreads, raw.workers);
        return ParseOutcome::exit_failure;
    }
    options.workers = workers ? static_cast<unsigned>(*workers) : ptwm::default_threads();
    if (ready_fd) {
        // Not open, the byte would be written nowhere and whoever waits on
        // it would wait forever; the failed write was only logged.
        if (*ready_fd < 0 || *ready_fd > INT_MAX || fcntl(static_cast<int>(*ready_fd), F_GETFD) == -1) {
            fprintf(stderr, "ptwmfs: ready_fd=%s: not an open file descriptor\n", raw.ready_fd);
            return ParseOutcome::exit_failure;
        }
        options.ready_fd = static_cast<int>(*ready_fd);
    }
    options.print_stats = raw.stats != 0;

    // Always read-only (the kernel then refuses writes before they reach
    // us), and the kernel checks the files' own permission bits, which
    // matters once allow_other lets other users in. (subtype=ptwmfs went
    // in before fuse_parse_cmdline.)
    char* mount_options = nullptr;
    bool ok = fuse_opt_add_opt(&mount_options, "ro") == 0 &&
              fuse_opt_add_opt(&mount_options, "default_permissions") == 0 &&
              fuse_opt_add_opt_escaped(&mount_options, ("fsname=" + options.store_dir).c_str()) == 0;
    if (ok) ok = fuse_opt_add_arg(&args, "-o") == 0 && fuse_opt_add_arg(&args, mount_options) == 0;
    free(mount_options);
    if (!ok) {
        fprintf(stderr, "ptwmfs: out of memory\n");
        return ParseOutcome::exit_failure;
    }
    return options_libfuse_takes(args) ? ParseOutcome::run : ParseOutcome::exit_failure;
}

}  // namespace ptwmfs
