// pack SRC s3://BUCKET/PREFIX: the tree is packed into a temporary directory
// and then sent: every store and copied file (multipart for large ones),
// --parallel parts in flight across them all, links as the manifest's
// entries, and the manifest last.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "store_open.hpp"

namespace ptwm::tool {

class RemoteUpload {
public:
    // Asks the server about the target first (a HEAD; the bucket's too when
    // the target is not there), so that wrong credentials or a missing
    // bucket fail before the pack, not after it.
    RemoteUpload(const std::string& url, const RemoteOptions& options, unsigned parallel, uint64_t part_bytes, bool quiet);
    ~RemoteUpload();  // removes the temporary tree
    RemoteUpload(const RemoteUpload&) = delete;
    RemoteUpload& operator=(const RemoteUpload&) = delete;

    // Where pack writes locally before the upload.
    std::filesystem::path local_target(const std::filesystem::path& src);
    // Uploads what pack wrote; throws Error naming the object that failed.
    // A tree's manifest already at the URL is deleted before any object is
    // replaced, and the new one put last: no moment shows a manifest over
    // a mix of old and new objects, interrupted or not.
    void send();

private:
    std::string url_;
    std::shared_ptr<remote::ObjectStore> store_;
    unsigned parallel_;
    uint64_t part_bytes_;
    bool quiet_;
    bool single_store_ = false;
    bool target_there_ = false;  // the manifest of a tree (deleted first), or the one store
    std::filesystem::path temp_, tree_;
};

}  // namespace ptwm::tool
