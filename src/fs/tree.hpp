// The mirror of the store directory: an inode table built once at mount
// time. The store is immutable while mounted, so the table never changes,
// inode numbers stay valid forever and lookups need no locking.
#pragma once

#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store_file.hpp"
#include "unique_fd.hpp"

namespace ptwmfs {

enum class NodeKind { directory, regular, store, symlink };

struct Node {
    fuse_ino_t ino = 0;
    fuse_ino_t parent = 0;
    NodeKind kind = NodeKind::regular;
    std::string name;       // as shown in the mount
    std::string disk_path;  // relative to the store directory; "" for the root
    struct stat attr {};    // as shown: st_ino = ino, stores with their original size
    std::string link_target;                // symlinks: the link text, verbatim
    std::vector<fuse_ino_t> children;       // directories: sorted by name
    std::unique_ptr<StoreFile> store;       // stores
};

class Tree {
public:
    // Walks `store_dir` (absolute). Stores that fail to open are logged and
    // shown as the plain .ptwm files they are; special files (devices,
    // FIFOs, sockets) are logged and left out. Throws ptwm::Error when the
    // directory itself cannot be read.
    static Tree scan(const std::string& store_dir);

    const Node* node(fuse_ino_t ino) const;
    const Node* lookup(const Node& dir, std::string_view name) const;
    const Node& root() const { return nodes_[FUSE_ROOT_ID]; }
    int root_fd() const { return root_fd_.get(); }
    size_t store_count() const;

    // Opens a plain file of the tree for reading, refusing any path that
    // would leave the store directory or pass through a symlink.
    UniqueFd open_regular(const Node& node) const;

private:
    class Scanner;
    std::string store_dir_;
    UniqueFd root_fd_;
    std::vector<Node> nodes_;  // indexed by inode number; slot 0 unused
};

}  // namespace ptwmfs
