#include "descriptor_limit.hpp"

#include <dirent.h>
#include <sys/resource.h>

#include <cstdint>
#include <vector>

namespace ptwmfs {

void raise_open_file_limit() {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
}

size_t open_descriptor_count() {
    DIR* dir = opendir("/proc/self/fd");
    if (dir == nullptr) return 0;
    size_t count = 0;
    while (dirent* entry = readdir(dir)) {
        if (entry->d_name[0] != '.') ++count;
    }
    closedir(dir);
    return count - 1;  // the listing's own
}

namespace {

// "a", "a and b", "a, b and c".
std::string listed(const std::vector<std::string>& items) {
    std::string text;
    for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) text += i + 1 == items.size() ? " and " : ", ";
        text += items[i];
    }
    return text;
}

std::string clone_fd_part(const DescriptorNeeds& needs) {
    return std::to_string(needs.clone_fd) + " for -o clone_fd's FUSE threads";
}

// The limit, when `needed` is more than it allows.
std::optional<uint64_t> limit_below(size_t needed) {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY || needed <= limit.rlim_cur)
        return std::nullopt;
    return limit.rlim_cur;
}

// The soft limit is the hard one by now (raise_open_file_limit): only
// whoever starts the daemon can raise it further.
std::string how_to_raise(size_t needed, uint64_t limit) {
    return "more than the limit of " + std::to_string(limit) + "; raise it where ptwmfs is started, e.g. 'ulimit -n " +
           std::to_string(needed) + "' in its shell (LimitNOFILE= in a systemd unit)";
}

}  // namespace

std::optional<std::string> descriptor_shortage(const std::string& store_dir, size_t stores,
                                               const DescriptorNeeds& needs) {
    const size_t needed = needs.total();
    const auto limit = limit_below(needed);
    if (!limit) return std::nullopt;
    std::vector<std::string> parts{"the stores'"};
    if (needs.clone_fd > 0) parts.push_back(clone_fd_part(needs));
    parts.push_back(std::to_string(kDescriptorsBesideStores) + " for the mount itself");
    return store_dir + ": its " + std::to_string(stores) + " stores need " + std::to_string(needed) +
           " open file descriptors (" + listed(parts) + "), " + how_to_raise(needed, *limit);
}

std::optional<std::string> remote_descriptor_shortage(const std::string& url, const DescriptorNeeds& needs) {
    const size_t needed = needs.total();
    const auto limit = limit_below(needed);
    if (!limit) return std::nullopt;
    std::vector<std::string> threads;
    const auto count = [&](size_t n, const char* one, const char* many) {
        if (n > 0) threads.push_back(std::to_string(n) + " " + (n == 1 ? one : many));
    };
    count(needs.fetch_connections, "background fetch thread", "background fetch threads");
    count(needs.fuse_threads, "FUSE thread", "FUSE threads");
    count(needs.workers, "decode-ahead worker", "decode-ahead workers");
    // Parts with lists of their own: separated by semicolons.
    std::string parts = std::to_string(needs.held) + " open already; " + std::to_string(needs.requests()) +
                        ", two each (a connection and a disk-cache file), for " + listed(threads) + "; ";
    if (needs.clone_fd > 0) parts += clone_fd_part(needs) + "; ";
    parts += "and " + std::to_string(kDescriptorsBesideStores) + " for the mount itself";
    return url + ": the mount needs " + std::to_string(needed) + " open file descriptors (" + parts + "), " +
           how_to_raise(needed, *limit);
}

}  // namespace ptwmfs
