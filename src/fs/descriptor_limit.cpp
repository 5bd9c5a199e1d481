#include "descriptor_limit.hpp"

#include <dirent.h>
#include <sys/resource.h>

#include <cstdint>

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

std::optional<std::string> descriptor_shortage(const std::string& store_dir, size_t stores, size_t needed) {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY || needed <= limit.rlim_cur)
        return std::nullopt;
    // The soft limit is the hard one by now (raise_open_file_limit): only
    // whoever starts the daemon can raise it further.
    return store_dir + ": its " + std::to_string(stores) + " stores need " + std::to_string(needed) +
           " open file descriptors (the stores' and " + std::to_string(kDescriptorsBesideStores) +
           " for the mount itself), more than the limit of " + std::to_string(limit.rlim_cur) +
           "; raise it where ptwmfs is started, e.g. 'ulimit -n " + std::to_string(needed) +
           "' in its shell (LimitNOFILE= in a systemd unit)";
}

}  // namespace ptwmfs
