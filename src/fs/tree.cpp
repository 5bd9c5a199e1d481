#include "tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "log.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/store/store_names.hpp"

namespace ptwmfs {
namespace {

using ptwm::kStoreSuffix;
using ptwm::shown_store_name;
using ptwm::shows_as_store;

// One directory entry, classified, before name clashes are settled.
struct Candidate {
    std::string shown_name;
    std::string disk_name;
    struct stat attr {};
    NodeKind kind = NodeKind::regular;
    std::string link_target;
    std::shared_ptr<const ptwm::ByteSource> store_source;  // stores: open, superblock checked
};

// Failed system calls that ran out of descriptors are the limit's fault,
// not the file's: OutOfDescriptors, so that the daemon says what to raise.
[[noreturn]] void throw_open_error(const std::string& path, const std::string& what) {
    if (errno == EMFILE) throw OutOfDescriptors(path + ": " + what + ": " + strerror(EMFILE));
    ptwm::throw_errno(path, what);
}

std::vector<std::string> list_directory(int dir_fd, const std::string& path) {
    int fd = dup(dir_fd);
    DIR* dir = fd < 0 ? nullptr : fdopendir(fd);
    if (dir == nullptr) {
        const int error = errno;
        if (fd >= 0) close(fd);
        errno = error;
        throw_open_error(path, "cannot list directory");
    }
    std::vector<std::string> names;
    while (dirent* entry = readdir(dir)) {
        std::string_view name = entry->d_name;
        if (name != "." && name != "..") names.emplace_back(name);
    }
    closedir(dir);
    return names;
}

std::string read_link(int dir_fd, const std::string& name, size_t size_hint, const std::string& path) {
    std::string target(std::max<size_t>(size_hint, 64) + 1, '\0');
    for (;;) {
        ssize_t n = readlinkat(dir_fd, name.c_str(), target.data(), target.size());
        if (n < 0) ptwm::throw_errno(path, "cannot read symlink");
        if (static_cast<size_t>(n) < target.size()) {
            target.resize(static_cast<size_t>(n));
            return target;
        }
        target.resize(target.size() * 2);
    }
}

std::string join(const std::string& dir, const std::string& name) {
    return dir.empty() ? name : dir + "/" + name;
}

}  // namespace

class Tree::Scanner {
public:
    explicit Scanner(Tree& tree) : tree_(tree) {}

    void scan_directory(int dir_fd, fuse_ino_t dir_ino) {
        const std::string dir_path = tree_.nodes_[dir_ino].disk_path;
        std::vector<Candidate> candidates;
        for (std::string& name : list_directory(dir_fd, full_path(dir_path))) {
            const std::string disk_path = join(dir_path, name);
            if (auto c = classify(dir_fd, disk_path, std::move(name))) {
                candidates.push_back(std::move(*c));
            }
        }

        // A store shadows a plain entry of the name it shows (X.ptwm over X).
        std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
            if (a.shown_name != b.shown_name) return a.shown_name < b.shown_name;
            return a.kind == NodeKind::store && b.kind != NodeKind::store;
        });
        std::vector<fuse_ino_t> children;
        for (Candidate& c : candidates) {
            if (!children.empty() && tree_.nodes_[children.back()].name == c.shown_name) {
                log_info("%s: hidden by the store %s, shown under its name",
                         full_path(join(dir_path, c.disk_name)).c_str(),
                         full_path(tree_.nodes_[children.back()].disk_path).c_str());
                continue;
            }
            children.push_back(add_node(std::move(c), dir_ino, dir_path));
        }
        tree_.nodes_[dir_ino].children = children;

        for (fuse_ino_t child : children) {
            if (tree_.nodes_[child].kind != NodeKind::directory) continue;
            const std::string name = tree_.nodes_[child].name;  // directories keep their names
            UniqueFd sub(openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
            if (!sub) throw_open_error(full_path(tree_.nodes_[child].disk_path), "cannot open directory");
            scan_directory(sub.get(), child);
        }
    }

    // A store mounted alone (`ptwmfs NAME.ptwm MOUNTPOINT`): the root shows
    // it, and nothing else of its directory. What a directory's scan would
    // show as a plain file fails the mount here, with the reason.
    void scan_single_store(int dir_fd, std::string name) {
        const std::string path = full_path(name);
        Candidate c;
        if (fstatat(dir_fd, name.c_str(), &c.attr, 0) != 0) throw_open_error(path, "cannot stat");
        if (!S_ISREG(c.attr.st_mode)) throw ptwm::Error(path + ": not a store directory or a store file");
        load_store(dir_fd, name, path, c, 0);
        if (!shows_as_store(name)) c.shown_name = name;  // a store named without .ptwm keeps its name
        c.disk_name = std::move(name);
        tree_.nodes_[FUSE_ROOT_ID].children = {add_node(std::move(c), FUSE_ROOT_ID, "")};
    }

private:
    std::string full_path(const std::string& disk_path) const {
        return disk_path.empty() ? tree_.store_dir_ : tree_.store_dir_ + "/" + disk_path;
    }

    std::optional<Candidate> classify(int dir_fd, const std::string& disk_path, std::string name) {
        Candidate c;
        const std::string path = full_path(disk_path);
        if (fstatat(dir_fd, name.c_str(), &c.attr, AT_SYMLINK_NOFOLLOW) != 0) {
            log_error("%s: cannot stat, left out: %s", path.c_str(), strerror(errno));
            return std::nullopt;
        }
        c.shown_name = name;
        if (S_ISDIR(c.attr.st_mode)) {
            c.kind = NodeKind::directory;
        } else if (S_ISLNK(c.attr.st_mode)) {
            c.kind = NodeKind::symlink;
            c.link_target = read_link(dir_fd, name, static_cast<size_t>(c.attr.st_size), path);
        } else if (S_ISREG(c.attr.st_mode)) {
            c.kind = NodeKind::regular;
            if (shows_as_store(name)) {
                open_store(dir_fd, name, path, c);
            } else if (name.ends_with(kStoreSuffix)) {
                log_error("%s: a store would be shown as '%s', shown as the plain file it is", path.c_str(),
                          std::string(shown_store_name(name)).c_str());
            }
        } else {
            log_error("%s: not a regular file, directory or symlink, left out", path.c_str());
            return std::nullopt;
        }
        c.disk_name = std::move(name);
        return c;
    }

    // Only the superblock is read here (one pread of 128 bytes): it gives
    // the size the mount shows. The header and index load on first read
    // (StoreFile::load), so a store whose superblock is sound but whose
    // header or index is damaged is shown as a store and its reads fail.
    // Throws what is wrong with the file. `nofollow`: O_NOFOLLOW where the
    // name must still be the regular file the scan saw, 0 for a path given.
    static void load_store(int dir_fd, const std::string& name, const std::string& path, Candidate& c, int nofollow) {
        {
            UniqueFd fd(openat(dir_fd, name.c_str(), O_RDONLY | nofollow | O_CLOEXEC));
            if (!fd) throw_open_error(path, "cannot open");
        }
        std::shared_ptr<const ptwm::ByteSource> source = ptwm::LocalFileSource::open(path);
        const ptwm::Superblock sb = ptwm::StoreReader::read_superblock(*source);
        c.store_source = std::move(source);
        c.kind = NodeKind::store;
        c.shown_name = shown_store_name(name);
        c.attr.st_size = static_cast<off_t>(sb.original_size);
        c.attr.st_blocks = static_cast<blkcnt_t>((sb.original_size + 511) / 512);
    }

    // A store of a directory: one that fails to load is logged and shown as
    // the plain file it is.
    static void open_store(int dir_fd, const std::string& name, const std::string& path, Candidate& c) {
        try {
            // Refused if the name became a symlink since classify saw a regular file.
            load_store(dir_fd, name, path, c, O_NOFOLLOW);
        } catch (const OutOfDescriptors&) {
            throw;  // not the store's fault: the whole scan fails
        } catch (const std::exception& e) {
            log_error("%s: not a usable store, shown as the plain file it is: %s", path.c_str(), e.what());
        }
    }

    fuse_ino_t add_node(Candidate c, fuse_ino_t parent, const std::string& dir_path) {
        const fuse_ino_t ino = tree_.nodes_.size();
        Node& node = tree_.nodes_.emplace_back();
        node.ino = ino;
        node.parent = parent;
        node.kind = c.kind;
        node.name = std::move(c.shown_name);
        node.disk_path = join(dir_path, c.disk_name);
        node.attr = c.attr;
        node.disk_dev = c.attr.st_dev;
        node.disk_ino = c.attr.st_ino;
        node.attr.st_ino = ino;
        node.link_target = std::move(c.link_target);
        if (auto local = std::dynamic_pointer_cast<const ptwm::LocalFileSource>(c.store_source))
            tree_.local_sources_.push_back(std::move(local));
        if (c.store_source)
            node.store = std::make_unique<StoreFile>(ino, std::move(c.store_source), static_cast<uint64_t>(c.attr.st_size));
        return ino;
    }

    Tree& tree_;
};

namespace {

// A store given alone: its directory and its name, or nothing for a
// directory (or what fails to stat: opening it as one says why).
std::optional<std::pair<std::string, std::string>> single_store(const std::string& path) {
    struct stat attr {};
    if (stat(path.c_str(), &attr) != 0 || S_ISDIR(attr.st_mode)) return std::nullopt;
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos) return std::pair{std::string("."), path};
    return std::pair{slash == 0 ? std::string("/") : path.substr(0, slash), path.substr(slash + 1)};
}

}  // namespace

Tree Tree::scan(const std::string& store_dir) {
    Tree tree;
    const auto single = single_store(store_dir);
    // A single store's directory is opened, for the root's attributes and
    // for the file's open, as a store directory's would be.
    tree.store_dir_ = single ? single->first : store_dir;
    tree.root_fd_ = UniqueFd(open(tree.store_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!tree.root_fd_) throw_open_error(tree.store_dir_, "cannot open store directory");

    tree.nodes_.emplace_back();  // inode 0 does not exist
    Node& root = tree.nodes_.emplace_back();
    root.ino = FUSE_ROOT_ID;
    root.parent = FUSE_ROOT_ID;
    root.kind = NodeKind::directory;
    if (fstat(tree.root_fd_.get(), &root.attr) != 0) ptwm::throw_errno(store_dir, "cannot stat");
    root.attr.st_ino = FUSE_ROOT_ID;

    if (single)
        Scanner(tree).scan_single_store(tree.root_fd_.get(), single->second);
    else
        Scanner(tree).scan_directory(tree.root_fd_.get(), FUSE_ROOT_ID);
    return tree;
}

namespace {

size_t count_store_files_in(int dir_fd, const std::string& path) {
    size_t count = 0;
    for (const std::string& name : list_directory(dir_fd, path)) {
        struct stat attr {};
        if (fstatat(dir_fd, name.c_str(), &attr, AT_SYMLINK_NOFOLLOW) != 0) continue;  // scan leaves it out
        if (S_ISREG(attr.st_mode) && shows_as_store(name)) {
            ++count;
        } else if (S_ISDIR(attr.st_mode)) {
            UniqueFd sub(openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
            if (!sub) throw_open_error(join(path, name), "cannot open directory");
            count += count_store_files_in(sub.get(), join(path, name));
        }
    }
    return count;
}

}  // namespace

size_t Tree::count_store_files(const std::string& store_dir) {
    if (single_store(store_dir)) return 1;
    UniqueFd root(open(store_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!root) throw_open_error(store_dir, "cannot open store directory");
    return count_store_files_in(root.get(), store_dir);
}

const Node* Tree::node(fuse_ino_t ino) const {
    return ino > 0 && ino < nodes_.size() ? &nodes_[ino] : nullptr;
}

const Node* Tree::lookup(const Node& dir, std::string_view name) const {
    auto it = std::lower_bound(dir.children.begin(), dir.children.end(), name,
                               [this](fuse_ino_t child, std::string_view n) { return nodes_[child].name < n; });
    if (it == dir.children.end() || nodes_[*it].name != name) return nullptr;
    return &nodes_[*it];
}

size_t Tree::store_count() const {
    return static_cast<size_t>(std::count_if(nodes_.begin(), nodes_.end(), [](const Node& n) { return n.store != nullptr; }));
}

UniqueFd Tree::open_regular(const Node& node) const {
    if (remote_) {
        errno = EIO;  // (not reached: Node::remote_file reads these)
        return UniqueFd(-1);
    }
    open_how how{};
    how.flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    long fd = syscall(SYS_openat2, root_fd_.get(), node.disk_path.c_str(), &how, sizeof how);
    UniqueFd file(static_cast<int>(fd));
    struct stat now {};
    if (!file || fstat(file.get(), &now) != 0) return file;
    if (now.st_dev == node.disk_dev && now.st_ino == node.disk_ino && now.st_size == node.attr.st_size &&
        now.st_mtim.tv_sec == node.attr.st_mtim.tv_sec && now.st_mtim.tv_nsec == node.attr.st_mtim.tv_nsec)
        return file;
    {
        std::lock_guard lock(changed_->mutex);
        if (changed_->logged.insert(node.ino).second)
            log_error("%s/%s: changed in the store directory since the mount (packed again?): its reads fail "
                      "with EIO, as the mount still shows the tree it found then; mount again",
                      store_dir_.c_str(), node.disk_path.c_str());
    }
    errno = EIO;
    return UniqueFd(-1);
}

}  // namespace ptwmfs
