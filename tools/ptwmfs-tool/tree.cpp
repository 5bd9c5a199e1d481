#include "tree.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "ptwm/base/cancellation.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/base/file_io.hpp"
#include "ptwm/base/utf8.hpp"
#include "ptwm/store/store_names.hpp"

namespace ptwm::tool {

namespace {

// An exclusive flock on the file or directory `path` (never through a
// link), or -1 where another process holds one (or it cannot be opened).
// The lock lasts while the descriptor is open.
int lock_path(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

// The hidden temporaries found in each directory when a run first wrote
// there, listed once a directory: asked for every output, a listing each
// made a directory of 3,000 files pack in 2.7 s instead of 0.1 s. Those the
// run makes itself come after the listing, so are never among them.
std::vector<fs::path> hidden_temporaries_in(const fs::path& parent) {
    static std::mutex mutex;
    static std::map<fs::path, std::vector<fs::path>> listed;
    const std::lock_guard lock(mutex);
    const auto [it, fresh] = listed.try_emplace(parent);
    if (fresh) {
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(parent, ec)) {
            const std::string entry = e.path().filename().string();
            if (entry.size() > 12 && entry[0] == '.' && entry.compare(entry.size() - 11, 5, ".tmp.") == 0)
                it->second.push_back(e.path());
        }
    }
    return it->second;
}

}  // namespace

void remove_abandoned_temporaries(const fs::path& output) {
    const std::string pattern = hidden_temporary_template(output.string());
    const fs::path parent = fs::path(pattern).parent_path().empty() ? fs::path(".") : fs::path(pattern).parent_path();
    const std::string name = fs::path(pattern).filename().string();
    const std::string prefix = name.substr(0, name.size() - 6);  // up to "XXXXXX"
    std::error_code ec;
    for (const auto& path : hidden_temporaries_in(parent)) {
        const std::string entry = path.filename().string();
        if (entry.size() != name.size() || entry.compare(0, prefix.size(), prefix) != 0) continue;
        const auto status = fs::symlink_status(path, ec);
        if (!fs::is_directory(status) && !fs::is_regular_file(status)) continue;
        const int fd = lock_path(path.string());
        if (fd < 0) continue;  // a run still writing it
        std::error_code rm_ec;
        fs::remove_all(path, rm_ec);
        ::close(fd);
        if (!rm_ec)
            std::fprintf(stderr, "ptwmfs-tool: removed %s, left by an earlier run that was killed\n",
                         printable(path.string()).c_str());
    }
}

void copy_file_atomic(const fs::path& src, const fs::path& dst, Durability durability) {
    require_other_file(src, dst);
    remove_abandoned_temporaries(dst);
    const File in = File::open_read(src);
    struct stat st;
    if (::fstat(in.fd(), &st) != 0) throw_errno(src, "cannot stat");
    AtomicOutput out(dst, st.st_mode & 07777, durability);
    out.keep_modification_time(st);
    std::vector<uint8_t> buf(8u << 20);
    const uint64_t size = in.size();
    for (uint64_t at = 0; at < size;) {
        throw_if_cancelled();
        const auto n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - at));
        in.read_exact(at, {buf.data(), n});
        out.write_at(at, {buf.data(), n});
        at += n;
    }
    out.commit();
}

StagedDirectory::StagedDirectory(fs::path dst) : dst_(dst.lexically_normal()) {
    if (!dst_.has_filename()) dst_ = dst_.parent_path();  // "out/": its last element is empty
    std::error_code ec;
    if (dst_.empty() || dst_ == "." || dst_ == ".." || fs::exists(fs::symlink_status(dst_, ec))) {
        dst_ = dst;  // written in place
        return;
    }
    const fs::path parent = dst_.has_parent_path() ? dst_.parent_path() : fs::path(".");
    fs::create_directories(parent, ec);
    if (ec) throw Error(parent.string() + ": cannot create directory: " + ec.message());
    std::string name = hidden_temporary_template(dst_.string());
    remove_abandoned_temporaries(dst_);
    if (::mkdtemp(name.data()) == nullptr) throw_errno(dst_, "cannot create a temporary directory beside it");
    staging_ = name;
    staging_lock_ = lock_path(name);
}

StagedDirectory::~StagedDirectory() {
    if (staging_.empty()) return;
    std::error_code ec;
    fs::remove_all(staging_, ec);
    if (staging_lock_ >= 0) ::close(staging_lock_);
}

void StagedDirectory::commit() {
    if (staging_.empty()) return;
    {
        // Its files were not synced one by one (Durability::kByCaller):
        // one syncfs puts them all on the disk before the tree gets its name.
        const int fd = ::open(staging_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) throw_errno(staging_, "cannot open the finished tree");
        const bool synced = ::syncfs(fd) == 0;
        const int err = errno;
        ::close(fd);
        errno = err;
        if (!synced) throw_errno(dst_, "cannot sync the finished tree");
    }
    // mkdtemp made it 0700: the tree's root gets a new directory's mode.
    ::chmod(staging_.c_str(), 0777 & ~process_umask());
    if (::rename(staging_.c_str(), dst_.c_str()) != 0) throw_errno(dst_, "cannot rename the finished tree into place");
    staging_.clear();
    if (staging_lock_ >= 0) ::close(staging_lock_);  // (after the rename: unlocked, it could be taken for abandoned)
    staging_lock_ = -1;
}

void require_outside(const fs::path& src, const fs::path& dst) {
    std::error_code ec;
    const auto absolute = [&](const fs::path& p) {
        // Absolute first: where no leading part of a relative path exists
        // yet, libstdc++'s weakly_canonical gives it back relative ("out",
        // "sub/out"), and no relative path has "/cwd" as its prefix. "d/"
        // ends in an empty element.
        fs::path a = fs::weakly_canonical(fs::absolute(p, ec), ec).lexically_normal();
        return a.has_filename() ? a : a.parent_path();
    };
    const fs::path from = absolute(src), to = absolute(dst);
    if (ec) return;  // (the walk reports what it cannot reach)
    const auto [end, _] = std::mismatch(from.begin(), from.end(), to.begin(), to.end());
    if (end == from.end())
        throw Error(dst.string() + ": is " + (from == to ? "" : "inside ") + src.string() +
                    ", which it would mirror into itself; give a destination outside it");
}

void require_other_file(const fs::path& src, const fs::path& dst) {
    std::error_code ec;
    if (fs::equivalent(src, dst, ec))
        throw Error(dst.string() + ": is " + src.string() + " itself, which the output would replace");
}

namespace {

// mirror_tree below `root`: every directory it writes into is checked to
// lie outside `root`, as the callers check the top one. A destination's
// subdirectory that is a link into the source would take the outputs
// there, beside (or over) their inputs.
void mirror_below(const fs::path& root, const fs::path& src, const fs::path& dst, const FileAction& on_file,
                  LinksOut links_out) {
    require_outside(root, dst);
    std::error_code ec;
    fs::create_directories(dst, ec);
    if (ec) throw Error(dst.string() + ": cannot create directory: " + ec.message());
    std::vector<fs::directory_entry> entries;
    for (const auto& e : fs::directory_iterator(src)) entries.push_back(e);
    std::sort(entries.begin(), entries.end());
    for (const auto& e : entries) {
        throw_if_cancelled();
        const fs::path target = dst / e.path().filename();
        const auto status = e.symlink_status();
        fs::path store;
        if (fs::is_symlink(status) && links_out != LinksOut::kept && links_to_a_file_outside(root, e.path())) {
            on_file(e.path(), target);
        } else if (fs::is_symlink(status) && links_out == LinksOut::followed_to_stores &&
                   !(store = store_behind_link_outside(root, e.path())).empty()) {
            on_file(store, target.string() + std::string(kStoreSuffix));
        } else if (fs::is_symlink(status)) {
            fs::remove(target, ec);
            fs::create_symlink(fs::read_symlink(e.path()), target, ec);
            if (ec) throw Error(target.string() + ": cannot create symlink: " + ec.message());
        } else if (fs::is_directory(status)) {
            mirror_below(root, e.path(), target, on_file, links_out);
        } else if (fs::is_regular_file(status)) {
            on_file(e.path(), target);
        } else {
            throw Error(e.path().string() + ": neither a regular file, a directory nor a symlink");
        }
    }
}

}  // namespace

void mirror_tree(const fs::path& src, const fs::path& dst, const FileAction& on_file, LinksOut links_out) {
    mirror_below(src, src, dst, on_file, links_out);
}

namespace {

// Where the symlink `link`, below `root`, points, when that lies outside
// `root`; else empty. Where the link itself points, not where a chain of
// links ends: a link to another file of the tree (alias.json ->
// config.json) stays a link, whatever that file is.
fs::path target_outside(const fs::path& root, const fs::path& link) {
    std::error_code ec, dir_ec, root_ec;
    const fs::path to = fs::read_symlink(link, ec);
    const fs::path dir = fs::canonical(link.parent_path().empty() ? fs::path(".") : link.parent_path(), dir_ec);
    const fs::path inside = fs::canonical(root, root_ec);
    if (ec || dir_ec || root_ec) return {};  // (unresolvable: kept as the link it is)
    const fs::path target = (to.is_absolute() ? to : dir / to).lexically_normal();
    const auto [end, _] = std::mismatch(inside.begin(), inside.end(), target.begin(), target.end());
    return end != inside.end() ? target : fs::path();
}

}  // namespace

bool links_to_a_file_outside(const fs::path& root, const fs::path& link) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(link, ec)) || !fs::is_regular_file(fs::status(link, ec))) return false;
    return !target_outside(root, link).empty();
}

fs::path store_behind_dangling_link(const fs::path& link) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(link, ec)) || fs::exists(fs::status(link, ec))) return {};
    const fs::path to = fs::read_symlink(link, ec);
    if (ec || !to.has_filename()) return {};
    const fs::path store = (to.is_absolute() ? to : link.parent_path() / to).string() + std::string(kStoreSuffix);
    return fs::is_regular_file(fs::status(store, ec)) ? store : fs::path();
}

fs::path store_behind_link_outside(const fs::path& root, const fs::path& link) {
    return target_outside(root, link).empty() ? fs::path() : store_behind_dangling_link(link);
}

std::vector<fs::path> files_and_links(const fs::path& root) {
    std::vector<fs::path> out;
    for (const auto& e : fs::recursive_directory_iterator(root))
        if (e.is_symlink() || e.is_regular_file()) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace ptwm::tool
