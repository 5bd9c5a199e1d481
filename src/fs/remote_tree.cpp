// The tree of an s3:// or https:// mount: built from the manifest that
// `ptwmfs-tool pack` wrote beside the stores, never from a bucket listing.
// Stores and plain files read through HttpSource (range GETs behind the disk
// cache), each opened on its first read.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <map>

#include "log.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/remote/http_source.hpp"
#include "ptwm/remote/manifest.hpp"
#include "ptwm/remote/manifest_version.hpp"
#include "ptwm/store/store_names.hpp"
#include "ptwm/store/store_reader.hpp"
#include "tree.hpp"

namespace ptwmfs {
namespace {

using ptwm::remote::DiskCache;
using ptwm::remote::Manifest;
using ptwm::remote::ManifestEntry;
using ptwm::remote::ObjectStore;

std::string manifest_key(const ObjectStore& store) { return std::string("manifest\n") + store.root().text; }

// The version of the manifest a mount was built from
// (ptwm::remote::ManifestVersion says why it is asked for), checked once per
// object, when it is opened (its first read).
struct MountedVersion {
    ptwm::remote::ManifestVersion version;
    bool from_server = false;  // false: from the disk cache
    std::atomic<bool> logged{false};

    // Throws ObjectChanged (the read fails with EIO) when the manifest is
    // gone or another version now; a server that cannot be reached passes.
    void require_unchanged(ObjectStore& store, const ptwm::remote::HttpSource& opened) {
        if (!from_server || opened.opened_offline()) return;
        std::optional<std::string> now;
        try {
            now = version.change(store);
        } catch (const ptwm::remote::RemoteError& e) {
            if (e.transient()) return;  // offline: the cached object is served as before
            throw;
        }
        if (!now) return;
        const std::string what = opened.name() + ": the tree was packed again since it was mounted (" +
                                 version.where.text + " is " + *now +
                                 "); objects first read since then fail rather than mix two trees: mount it again";
        if (!logged.exchange(true)) log_error("%s", what.c_str());
        throw ptwm::remote::ObjectChanged(what);
    }
};

// The manifest from the server, kept in the disk cache; the cached one when
// the server cannot be reached.
Manifest fetch_manifest(ObjectStore& store, DiskCache* cache, MountedVersion& mounted) {
    const auto where = store.object(ptwm::remote::kManifestName);
    std::vector<uint8_t> bytes;
    try {
        bytes = ptwm::remote::ManifestVersion::fetch(store, mounted.version);
        mounted.from_server = true;
        if (cache) cache->put(manifest_key(store), bytes);
    } catch (const ptwm::remote::RemoteError& e) {
        std::optional<std::vector<uint8_t>> cached;
        if (e.object_missing())  // (a missing bucket is said as such)
            throw ptwm::Error(store.root().text + ": no packed tree here (no " + ptwm::remote::kManifestName + ")");
        if (!e.transient() || !cache || !(cached = cache->get(manifest_key(store)))) throw;
        log_error("%s; mounting from the disk cache", e.what());
        bytes = std::move(*cached);
    }
    return Manifest::parse(bytes, where.text);
}

std::string parent_of(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? "" : path.substr(0, slash);
}
std::string leaf_of(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

// What every node of a remote tree starts from: ours, now.
struct stat base_attr() {
    struct stat base {};
    base.st_uid = getuid();
    base.st_gid = getgid();
    base.st_nlink = 1;
    base.st_blksize = 1 << 20;
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    base.st_atim = base.st_mtim = base.st_ctim = now;
    return base;
}

}  // namespace

Tree Tree::load_remote(std::shared_ptr<ObjectStore> store, std::shared_ptr<DiskCache> cache) {
    Tree tree;
    tree.remote_ = true;
    tree.store_dir_ = store->root().text;
    // statfs reports the disk cache's file system.
    tree.root_fd_ = UniqueFd(open(cache ? cache->options().dir.c_str() : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    const struct stat base = base_attr();

    tree.nodes_.emplace_back();  // inode 0 does not exist
    Node& root = tree.nodes_.emplace_back();
    root.ino = FUSE_ROOT_ID;
    root.parent = FUSE_ROOT_ID;
    root.kind = NodeKind::directory;
    root.attr = base;
    root.attr.st_mode = S_IFDIR | 0755;
    root.attr.st_nlink = 2;
    root.attr.st_ino = FUSE_ROOT_ID;

    // A URL naming one store (.../NAME.ptwm, as pack writes one file): the
    // root holds NAME alone. It has no manifest to give its size, so the
    // store opens now (a HEAD and its superblock, or the disk cache's copy).
    const std::string leaf = store->root().leaf();
    if (ptwm::shows_as_store(leaf)) {
        std::shared_ptr<const ptwm::ByteSource> source = ptwm::remote::HttpSource::open(store, store->object(""), cache);
        const uint64_t size =
            reading_anew_on_failure(*source, [&] { return ptwm::StoreReader::read_superblock(*source).original_size; });
        Node& n = tree.nodes_.emplace_back();
        n.ino = FUSE_ROOT_ID + 1;
        n.parent = FUSE_ROOT_ID;
        n.kind = NodeKind::store;
        n.name = std::string(ptwm::shown_store_name(leaf));
        n.disk_path = leaf;
        n.attr = base;
        n.attr.st_ino = n.ino;
        n.attr.st_mode = S_IFREG | 0444;
        n.attr.st_size = static_cast<off_t>(size);
        n.attr.st_blocks = static_cast<blkcnt_t>((size + 511) / 512);
        n.store = std::make_unique<StoreFile>(n.ino, std::move(source), size);
        tree.nodes_[FUSE_ROOT_ID].children = {n.ino};
        return tree;
    }

    auto version = std::make_shared<MountedVersion>();
    const Manifest manifest = fetch_manifest(*store, cache.get(), *version);
    std::map<std::string, fuse_ino_t> dirs{{"", FUSE_ROOT_ID}};
    std::map<std::pair<fuse_ino_t, std::string>, size_t> shown;  // (directory, name) -> its place among the children
    for (const auto& e : manifest.entries) {
        const auto parent = dirs.find(parent_of(e.path));
        if (parent == dirs.end()) {
            log_error("%s: '%s': its directory is not listed before it in the manifest, left out",
                      tree.store_dir_.c_str(), e.path.c_str());
            continue;
        }
        Node n;
        n.parent = parent->second;
        n.name = leaf_of(e.path);
        n.disk_path = e.path;
        n.attr = base;
        switch (e.kind) {
        case ManifestEntry::Kind::kDirectory:
            n.kind = NodeKind::directory;
            n.attr.st_mode = S_IFDIR | e.mode;
            n.attr.st_nlink = 2;
            break;
        case ManifestEntry::Kind::kLink:
            n.kind = NodeKind::symlink;
            n.link_target = e.target;
            n.attr.st_mode = S_IFLNK | 0777;
            n.attr.st_size = static_cast<off_t>(e.target.size());
            break;
        case ManifestEntry::Kind::kFile: {
            n.kind = NodeKind::regular;
            n.attr.st_mode = S_IFREG | e.mode;
            n.attr.st_size = static_cast<off_t>(e.size);
            const ptwm::remote::RemoteUrl object = store->object(e.path);
            n.remote_file = std::make_unique<RemotePlainFile>(
                object.text, e.size, [store, cache, object, version]() -> std::shared_ptr<const ptwm::ByteSource> {
                    // The kernel's page cache keeps what was served: few
                    // recent blocks are needed besides those fetched ahead.
                    ptwm::remote::HttpSourceOptions options;
                    options.memory_blocks = 4;
                    std::shared_ptr<ptwm::remote::HttpSource> source =
                        ptwm::remote::HttpSource::open(store, object, cache, options);
                    version->require_unchanged(*store, *source);  // after the object's HEAD
                    return source;
                });
            break;
        }
        case ManifestEntry::Kind::kStore: {
            // Nothing is fetched per store at mount: the manifest gives the
            // size, and the store opens on first read (StoreFile::load).
            n.kind = NodeKind::store;
            if (ptwm::shows_as_store(n.name)) n.name = std::string(ptwm::shown_store_name(n.name));
            n.attr.st_mode = S_IFREG | e.mode;
            n.attr.st_size = static_cast<off_t>(e.original_size);
            const ptwm::remote::RemoteUrl object = store->object(e.path);
            n.store = std::make_unique<StoreFile>(
                tree.nodes_.size(), object.text, e.original_size,
                [store, cache, object, version]() -> std::shared_ptr<const ptwm::ByteSource> {
                    std::shared_ptr<ptwm::remote::HttpSource> source = ptwm::remote::HttpSource::open(store, object, cache);
                    version->require_unchanged(*store, *source);  // after the object's HEAD
                    return source;
                });
            break;
        }
        }
        n.attr.st_blocks = (n.attr.st_size + 511) / 512;
        const fuse_ino_t ino = tree.nodes_.size();
        n.ino = ino;
        n.attr.st_ino = ino;
        // A store shadows a plain entry of the name it shows (as on disk).
        // Names are looked up, not searched for: a directory of 40,000
        // entries took 3.8 s to mount with a scan of its siblings each.
        auto& siblings = tree.nodes_[n.parent].children;
        const auto [clash, fresh] = shown.try_emplace({n.parent, n.name}, siblings.size());
        if (!fresh) {
            if (n.kind != NodeKind::store) continue;
            siblings[clash->second] = ino;
        } else {
            siblings.push_back(ino);
        }
        if (n.kind == NodeKind::directory) dirs[e.path] = ino;
        tree.nodes_.push_back(std::move(n));
    }
    for (auto& node : tree.nodes_)
        std::sort(node.children.begin(), node.children.end(),
                  [&](fuse_ino_t a, fuse_ino_t b) { return tree.nodes_[a].name < tree.nodes_[b].name; });
    return tree;
}

}  // namespace ptwmfs
