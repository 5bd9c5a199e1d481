// Uploading a local file to S3: one PUT for a small file, a multipart upload
// with several parts in flight for a large one, completed only when every
// part is in (and aborted otherwise), so the object appears whole or not at all.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ptwm/remote/object_store.hpp"

namespace ptwm::remote {

struct UploadOptions {
    uint64_t part_bytes = 16ull << 20;  // S3 wants >= 5 MiB for every part but the last
    unsigned parallel_parts = 4;
    std::function<void(uint64_t bytes)> on_sent;  // called as parts complete (any thread)
};

void upload_file(ObjectStore& store, const RemoteUrl& object, const std::string& local_path,
                 const UploadOptions& options);

}  // namespace ptwm::remote
