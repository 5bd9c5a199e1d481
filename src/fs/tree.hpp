// The mirror of the store directory: an inode table built once at mount
// time. The store is immutable while mounted, so the table never changes,
// inode numbers stay valid forever and lookups need no locking.
#pragma once

#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "ptwm/base/error.hpp"
#include "ptwm/remote/disk_cache.hpp"
#include "ptwm/remote/object_store.hpp"
#include "remote_plain_file.hpp"
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
    dev_t disk_dev = 0;     // local files: the file the scan saw in the store directory,
    ino_t disk_ino = 0;     // which open_regular checks a plain file still is
    std::string link_target;                // symlinks: the link text, verbatim
    std::vector<fuse_ino_t> children;       // directories: sorted by name
    std::unique_ptr<StoreFile> store;       // stores
    std::unique_ptr<RemotePlainFile> remote_file;  // a remote tree's plain files
};

// Tree::scan ran out of file descriptors (EMFILE) opening a store or a
// directory: the stores need more than the limit allows.
class OutOfDescriptors : public ptwm::Error {
public:
    using Error::Error;
    std::shared_ptr<const Error> clone() const override { return std::make_shared<OutOfDescriptors>(what()); }
    [[noreturn]] void throw_copy() const override { throw OutOfDescriptors(what()); }
};

class Tree {
public:
    // Walks `store_dir` (absolute), reading only each store's superblock.
    // Stores whose superblock fails to open or validate are logged and
    // shown as the plain .ptwm files they are; a store with a sound
    // superblock and a damaged header or index is shown as a store whose
    // reads fail with EIO (found on first read). Special files (devices,
    // FIFOs, sockets) are logged and left out. Throws ptwm::Error when the
    // directory itself cannot be read, OutOfDescriptors when the store
    // files need more descriptors than the limit leaves. A `store_dir` that
    // is a file is a store shown alone, as the root's only entry (a file
    // that is no usable store throws).
    static Tree scan(const std::string& store_dir);

    // The files under `store_dir` that scan takes for stores, by their
    // names (nothing is opened but one directory a level): how many
    // descriptors the stores need once scan has run out of them.
    static size_t count_store_files(const std::string& store_dir);

    // The tree a manifest lists at an s3:// or https:// URL (remote_tree.cpp):
    // stores are shown with the original size the manifest gives, and
    // opened through an HttpSource behind `cache` on first read (its size
    // and ETag, superblock, header and index fetched then, or taken from the
    // cache when the server cannot be reached). Throws ptwm::Error when
    // there is no manifest to be had.
    static Tree load_remote(std::shared_ptr<ptwm::remote::ObjectStore> store,
                            std::shared_ptr<ptwm::remote::DiskCache> cache);

    const Node* node(fuse_ino_t ino) const;
    const Node* lookup(const Node& dir, std::string_view name) const;
    const Node& root() const { return nodes_[FUSE_ROOT_ID]; }
    int root_fd() const { return root_fd_.get(); }
    size_t store_count() const;

    // Opens a plain file of a local tree for reading, refusing any path that
    // would leave the store directory or pass through a symlink. (A remote
    // tree's plain files have no descriptor: Node::remote_file reads them.)
    // A file that is no longer the one the scan saw (another inode, size or
    // modification time: the store directory was packed again, or the file
    // edited) fails with EIO, logged once a file: the mount keeps serving
    // the stores it opened at mount and the tree it listed then, and
    // serving a plain file's new bytes beside them would mix two trees (a
    // Hugging Face cache's new refs/main naming a snapshot the mount does
    // not list, a new config.json beside the old weights).
    UniqueFd open_regular(const Node& node) const;
    // The local stores' sources (none in a remote tree), for IdlePageDropper.
    const std::vector<std::shared_ptr<const ptwm::LocalFileSource>>& local_sources() const { return local_sources_; }

private:
    class Scanner;
    std::string store_dir_;
    bool remote_ = false;  // a tree from a manifest: no plain file is on this machine
    UniqueFd root_fd_;
    std::vector<Node> nodes_;  // indexed by inode number; slot 0 unused
    std::vector<std::shared_ptr<const ptwm::LocalFileSource>> local_sources_;
    // The plain files open_regular found changed and logged (each once).
    struct ChangedFiles {
        std::mutex mutex;
        std::unordered_set<fuse_ino_t> logged;
    };
    std::unique_ptr<ChangedFiles> changed_ = std::make_unique<ChangedFiles>();
};

}  // namespace ptwmfs
