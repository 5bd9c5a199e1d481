// ptwmfs: mounts a directory made by `ptwmfs-tool pack` read-only, showing
// every NAME.ptwm store as the original NAME, byte for byte.
#include <fuse_lowlevel.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <exception>
#include <memory>

#include "descriptor_limit.hpp"
#include "filesystem.hpp"
#include "idle_page_dropper.hpp"
#include "index_cache.hpp"
#include "log.hpp"
#include "options.hpp"
#include "prefetcher.hpp"
#include "ptwm/store/chunk_cache.hpp"
#include "ptwm/remote/http_source.hpp"
#include "stats.hpp"
#include "tree.hpp"

namespace {

using namespace ptwmfs;

// A store no read has touched for this long has its pages dropped
// (-o page_cache=drop): long enough that a reader between two tensors
// keeps its read-ahead, short enough that a model loaded through the mount
// is cached once, as the files it shows, a moment after the load.
constexpr std::chrono::milliseconds kStoreIdle{1000};

// Descriptors a local store keeps open: its file, and with page_cache=direct
// the same file opened again with O_DIRECT.
size_t descriptors_per_store(ptwm::PageCachePolicy policy) {
    return policy == ptwm::PageCachePolicy::direct ? 2 : 1;
}

// Threads serving FUSE requests: max_threads (libfuse starts at least
// one), or the one of -s.
size_t fuse_threads(const Options& options) {
    return options.fuse.singlethread ? 1 : std::max(1u, options.fuse.max_threads);
}

// What the daemon will open besides what it holds: with -o clone_fd every
// FUSE thread of the multi-threaded loop opens /dev/fuse again.
DescriptorNeeds descriptor_needs(const Options& options) {
    DescriptorNeeds needs;
    if (options.fuse.clone_fd && !options.fuse.singlethread) needs.clone_fd = fuse_threads(options);
    return needs;
}

// The local tree, or nothing once the reason is logged; a store directory
// whose stores need more descriptors than the limit allows is refused here,
// before mounting, with the numbers.
std::optional<Tree> scan_local_tree(const Options& options) {
    const size_t open_before = open_descriptor_count();
    std::optional<Tree> tree;
    size_t stores = 0;
    DescriptorNeeds needs = descriptor_needs(options);
    try {
        tree.emplace(Tree::scan(options.store_dir));
        stores = tree->local_sources().size();
        needs.held = open_descriptor_count();
    } catch (const OutOfDescriptors&) {
        // The partial tree is gone and its stores closed: count them by name.
        try {
            stores = Tree::count_store_files(options.store_dir);
        } catch (const std::exception& e) {
            log_error("%s", e.what());
            return std::nullopt;
        }
        // (+ 1: the store directory, which the tree keeps open.)
        needs.held = open_before + 1 + stores * descriptors_per_store(options.page_cache);
    } catch (const std::exception& e) {
        log_error("%s", e.what());
        return std::nullopt;
    }
    if (auto shortage = descriptor_shortage(options.store_dir, stores, needs)) {
        log_error("%s", shortage->c_str());
        return std::nullopt;
    }
    return tree;
}

// Whether the requests of an s3:// or https:// mount have the descriptors
// they need, the reason logged if not. Before the first request: the limit
// is known without the server.
bool remote_descriptors_suffice(const Options& options) {
    DescriptorNeeds needs = descriptor_needs(options);
    needs.held = open_descriptor_count();
    // As HttpSource and Prefetcher start them: no background fetches with
    // fetch_ahead=0, no decode-ahead workers without a window.
    needs.fetch_connections = options.fetch_ahead > 0 ? options.fetch_connections : 0;
    needs.fuse_threads = fuse_threads(options);
    needs.workers = Prefetcher::worker_threads(options.workers, options.readahead);
    if (auto shortage = remote_descriptor_shortage(options.store_dir, needs)) {
        log_error("%s", shortage->c_str());
        return false;
    }
    return true;
}

// s3:// or https://: the object store, the disk cache, the manifest's tree.
Tree load_remote_tree(const Options& options) {
    ptwm::remote::S3Overrides s3{options.s3_endpoint, options.region, options.profile};
    ptwm::remote::RetryPolicy retry;
    retry.timeout_seconds = options.remote_timeout;
    ptwm::remote::FetchAheadOptions fetch_ahead;
    fetch_ahead.window_blocks = static_cast<uint32_t>((options.fetch_ahead + (1u << 20) - 1) >> 20);  // 1 MiB blocks
    fetch_ahead.connections = options.fetch_connections;
    auto store = std::make_shared<ptwm::remote::ObjectStore>(*ptwm::remote::parse_remote_url(options.store_dir), s3,
                                                             retry, fetch_ahead);
    ptwm::remote::DiskCacheOptions cache_options;
    cache_options.dir = options.disk_cache.empty() ? ptwm::remote::default_disk_cache_dir() : options.disk_cache;
    cache_options.max_bytes = options.disk_cache_size;
    auto cache = std::make_shared<ptwm::remote::DiskCache>(cache_options, store->client().shared_stats());
    remote_stats_source() = [stats = store->client().shared_stats()] { return stats->json(); };
    return Tree::load_remote(std::move(store), std::move(cache));
}

// Tells whoever started us (tests, scripts) that the mount is usable.
void signal_ready(int fd) {
    if (fd < 0) return;
    const char byte = '1';
    if (write(fd, &byte, 1) != 1) log_error("ready_fd=%d: %s", fd, strerror(errno));
    close(fd);
}

int serve(fuse_args& args, const Options& options) {
    // Chunk buffers are megabytes each and come and go with the cache. A
    // fixed mmap threshold keeps glibc from raising it after the first
    // free and then recycling them through heaps that never shrink: the
    // daemon's resident size must follow the cache bound.
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    // glibc's malloc sets itself up on its first call, and that setup is not
    // thread-safe: it attaches the calling thread to the main arena without
    // counting it, which is right only for the main thread before any other
    // exists. Where glibc's malloc is the allocator, mallopt just did it.
    // Under ASan (whose mallopt is a no-op) or a preloaded allocator, the
    // first call into glibc's own malloc would be a FUSE or prefetch
    // thread's malloc_trim (StoreFile::load, IndexCache): two of those at
    // once both attach, and at unmount the second to exit aborts in
    // __malloc_arena_thread_freeres (a->attached_threads > 0). So make that
    // first call here, on the main thread, before any thread is started.
    malloc_trim(0);
    raise_open_file_limit();
    // Before the scan opens any store.
    ptwm::set_default_page_cache_policy(options.page_cache);

    std::optional<Tree> tree;
    if (options.remote) {
        if (!remote_descriptors_suffice(options)) return 1;
        try {
            tree.emplace(load_remote_tree(options));
        } catch (const std::exception& e) {
            log_error("%s", e.what());
            return 1;
        }
    } else {
        tree = scan_local_tree(options);
        if (!tree) return 1;
        // Most likely the original model directory, given for the packed one.
        if (tree->store_count() == 0)
            log_info("%s holds no store (NAME.ptwm): every file is shown as it is ('ptwmfs-tool pack SRC DIR' makes "
                     "the stores)",
                     options.store_dir.c_str());
    }
    ptwm::ChunkCache cache(options.cache_size);
    IndexCache indexes(options.index_cache);
    Prefetcher prefetcher(cache, options.workers, options.readahead, options.kernel_readahead);
    Filesystem filesystem(*tree, cache, indexes, prefetcher);
    IdlePageDropper page_dropper(tree->local_sources(), kStoreIdle, kStoreIdle / 4);
    if (options.kernel_readahead > 0) {
        // As mountinfo spells it: the absolute path, symlinks resolved.
        std::unique_ptr<char, decltype(&free)> point(realpath(options.fuse.mountpoint, nullptr), &free);
        filesystem.set_kernel_readahead(point ? point.get() : options.fuse.mountpoint, options.kernel_readahead,
                                        options.kernel_readahead_given);
    }

    fuse_session* session =
        fuse_session_new(&args, &Filesystem::operations(), sizeof(fuse_lowlevel_ops), &filesystem);
    if (session == nullptr) return 1;
    int status = 1;
    if (fuse_set_signal_handlers(session) == 0) {
        if (fuse_session_mount(session, options.fuse.mountpoint) == 0) {
            if (fuse_daemonize(options.fuse.foreground) == 0) {
                if (!options.fuse.foreground) log_to_syslog();
                prefetcher.start();
                page_dropper.start();
                signal_ready(options.ready_fd);
                if (options.fuse.singlethread) {
                    status = fuse_session_loop(session);
                } else {
                    fuse_loop_config* loop = fuse_loop_cfg_create();
                    fuse_loop_cfg_set_clone_fd(loop, static_cast<unsigned>(options.fuse.clone_fd));
                    fuse_loop_cfg_set_max_threads(loop, options.fuse.max_threads);
                    status = fuse_session_loop_mt(session, loop);
                    fuse_loop_cfg_destroy(loop);
                }
                // A signal ends the loop with its number: a clean exit.
                if (status > 0) status = 0;
            }
            fuse_session_unmount(session);
        }
        fuse_remove_signal_handlers(session);
    }
    fuse_session_destroy(session);

    // To stderr in the foreground, to syslog once detached.
    if (options.print_stats) log_info("statistics: %s", filesystem.stats_json().c_str());
    return status == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char* argv[]) {
    fuse_args args = FUSE_ARGS_INIT(argc, argv);
    Options options;
    int status = 0;
    switch (parse_options(args, options)) {
        case ParseOutcome::exit_success: status = 0; break;
        case ParseOutcome::exit_failure: status = 1; break;
        case ParseOutcome::run: status = serve(args, options); break;
    }
    free(options.fuse.mountpoint);
    fuse_opt_free_args(&args);
    return status;
}
