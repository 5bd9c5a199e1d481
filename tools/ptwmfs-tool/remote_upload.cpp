#include "remote_upload.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "progress.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/base/utf8.hpp"
#include "ptwm/remote/uploader.hpp"

namespace ptwm::tool {

namespace fs = std::filesystem;
using remote::ManifestEntry;

RemoteUpload::RemoteUpload(const std::string& url, const RemoteOptions& options, unsigned parallel, uint64_t part_bytes, bool quiet)
    : url_(url), parallel_(parallel), part_bytes_(part_bytes), quiet_(quiet) {
    if (url.rfind("s3://", 0) != 0) throw Error(url + ": pack uploads to s3:// URLs only");
    single_store_ = url_names_store(url);
    store_ = std::make_shared<remote::ObjectStore>(*remote::parse_remote_url(url_), options.s3, options.retry);
    target_there_ = store_->exists(store_->object(single_store_ ? "" : remote::kManifestName));
    if (!target_there_) {
        // HEAD answers without a body: a missing key and a missing bucket
        // are both a bare 404, so the bucket is asked about on its own. (A
        // 403 there is credentials without s3:ListBucket, which pack does
        // not need: not an error.)
        remote::RemoteUrl bucket = store_->root();
        bucket.path.clear();
        bucket.text = "s3://" + bucket.bucket;
        if (store_->client().send(store_->request("HEAD", bucket)).status == 404)
            throw Error(url + ": there is no bucket '" + bucket.bucket + "'");
    }
    const char* tmpdir = std::getenv("TMPDIR");
    std::string pattern = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/ptwmfs-pack-XXXXXX";
    if (!::mkdtemp(pattern.data())) throw Error(pattern + ": cannot make a temporary directory");
    temp_ = pattern;
}

RemoteUpload::~RemoteUpload() {
    std::error_code ec;
    fs::remove_all(temp_, ec);
}

fs::path RemoteUpload::local_target(const fs::path& src) {
    if (single_store_) return tree_ = temp_ / "store.ptwm";
    tree_ = temp_ / "tree";
    // A single file goes into the tree as NAME.ptwm, like a directory DST.
    if (!fs::is_directory(src)) fs::create_directories(tree_);
    return tree_;
}

void RemoteUpload::send() {
    remote::ObjectStore& store = *store_;
    remote::Manifest manifest;
    if (single_store_) {
        ManifestEntry e;
        e.kind = ManifestEntry::Kind::kStore;
        e.size = fs::file_size(tree_);
        manifest.entries.push_back(e);
    } else {
        manifest = remote::Manifest::of_directory(tree_);
    }
    std::vector<const ManifestEntry*> objects;
    uint64_t total = 0;
    for (const auto& e : manifest.entries)
        if (e.kind == ManifestEntry::Kind::kStore || e.kind == ManifestEntry::Kind::kFile) {
            objects.push_back(&e);
            total += e.size;
        }
    Progress progress;
    std::mutex progress_mutex;
    std::atomic<uint64_t> sent{0};
    remote::UploadOptions uo;
    uo.parallel = parallel_;
    uo.part_bytes = part_bytes_;
    uo.on_sent = [&](uint64_t n) {
        const uint64_t done = sent.fetch_add(n) + n;
        std::lock_guard lock(progress_mutex);
        progress.update("upload to " + url_, done, total);
    };
    uo.on_warning = [&](const std::string& message) {
        std::lock_guard lock(progress_mutex);
        std::fprintf(stderr, "ptwmfs-tool pack: warning: %s\n", printable(message).c_str());
    };
    const auto start = std::chrono::steady_clock::now();
    const bool replacing_tree = !single_store_ && target_there_;
    if (replacing_tree) store.remove(store.object(remote::kManifestName));
    try {
        // Every file's parts and every small file from one queue: --parallel
        // requests (each a part in memory) in flight across the whole tree.
        std::vector<remote::UploadItem> items;
        for (const ManifestEntry* e : objects)
            items.push_back({store.object(e->path), (single_store_ ? tree_ : tree_ / e->path).string()});
        remote::upload_files(store, items, uo);
        // Last: a manifest present means every object it lists is there.
        if (!single_store_) {
            const std::string json = manifest.to_json();
            store.put(store.object(remote::kManifestName), {reinterpret_cast<const uint8_t*>(json.data()), json.size()});
        }
    } catch (...) {
        // The earlier tree's manifest is gone and some of its objects may be
        // replaced: whoever stopped the pack must not take the prefix for
        // the tree it held (the interrupt's "nothing half-written" is of
        // local files).
        if (replacing_tree) {
            progress.finish();
            std::fprintf(stderr,
                         "ptwmfs-tool pack: %s holds no tree now: its earlier manifest was deleted before the upload, "
                         "so mounts and unpack find nothing there until a pack into it completes\n",
                         printable(url_).c_str());
        }
        throw;
    }
    progress.finish();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!quiet_)
        std::printf("uploaded %zu object(s), %s, to %s in %.2f s (%.0f MB/s)\n", objects.size() + !single_store_,
                    human_bytes(total).c_str(), url_.c_str(), seconds, static_cast<double>(total) / 1e6 / seconds);
}

}  // namespace ptwm::tool
