// Uploading local files to S3: one PUT for a small file, a multipart upload
// for a large one, completed only when every part is in (and aborted
// otherwise), so each object appears whole or not at all. The parts and
// single PUTs of all the files go through one queue: `parallel` of them in
// flight at a time across the whole upload, each holding its bytes in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ptwm/remote/object_store.hpp"

namespace ptwm::remote {

struct UploadOptions {
    // S3 wants >= 5 MiB for every part but the last. An object that would
    // need more than 10,000 parts gets larger ones (multipart_part_bytes).
    uint64_t part_bytes = 16ull << 20;
    // Parts and single PUTs in flight at once, across all the files of an
    // upload_files call: memory holds about parallel x part_bytes.
    unsigned parallel = 4;
    std::function<void(uint64_t bytes)> on_sent;  // called as parts complete (any thread)
    // What the upload could not clean up, said to the user (any thread);
    // unset: printed on stderr.
    std::function<void(const std::string& message)> on_warning;
};

struct UploadItem {
    RemoteUrl object;
    std::string local_path;
};

// S3's limits on a multipart upload: its parts, and the size of each.
inline constexpr uint64_t kMaxUploadParts = 10000;
inline constexpr uint64_t kMaxPartBytes = 5ull << 30;

// The part size of a multipart upload of `size` bytes: `wanted`, or, when
// that would take more than kMaxUploadParts parts, the smallest multiple of
// 1 MiB that takes no more. Throws Error when that would be over
// kMaxPartBytes (an object over 48.8 TiB, beyond what S3 stores anyway).
uint64_t multipart_part_bytes(uint64_t size, uint64_t wanted);

// Uploads every item; throws the first failure, after aborting every
// multipart upload not completed (objects already whole stay). Last, done
// or failed, it lists the multipart uploads in progress under the items'
// common prefix (ListMultipartUploads, s3:ListBucketMultipartUploads) and
// aborts any for one of their keys: one whose create was answered to a
// connection that then broke, so that the create went again, would
// otherwise stay open for good. A listing refused is said on on_warning
// when an answer may have been lost (a create failed, a request retried).
void upload_files(ObjectStore& store, const std::vector<UploadItem>& items, const UploadOptions& options);

inline void upload_file(ObjectStore& store, const RemoteUrl& object, const std::string& local_path,
                        const UploadOptions& options) {
    upload_files(store, {UploadItem{object, local_path}}, options);
}

}  // namespace ptwm::remote
