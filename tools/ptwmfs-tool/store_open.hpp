// Opening a store, or a packed tree, from a local path or a URL
// (s3://BUCKET/PREFIX, https://HOST/PATH/): the one place the subcommands
// learn where their bytes come from.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>

#include "command.hpp"
#include "ptwm/remote/manifest.hpp"
#include "ptwm/remote/manifest_version.hpp"
#include "ptwm/remote/object_store.hpp"
#include "ptwm/store/store_reader.hpp"

namespace ptwm::tool {

struct RemoteOptions {
    remote::S3Overrides s3;
    remote::RetryPolicy retry;
    std::string first_given;  // the first of them on the command line ("" if none)
};

// Takes --s3-endpoint, --region, --profile and --remote-timeout SECONDS
// from the command line (call before positionals()).
RemoteOptions remote_options(Args& args);
// Throws UsageError when one of them was given and no operand is a URL:
// it would do nothing (as the daemon refuses them on a local directory).
void refuse_unused(const RemoteOptions& options, const std::vector<std::string>& operands);
// The lines --help shows for them.
extern const char* const kRemoteHelp;
// --help / -h: prints the command's `help` and kRemoteHelp; true when asked.
bool printed_help(Args& args, const char* help);

// Whether `text` is a URL we read (s3://, https://, http://); throws Error
// naming the scheme for any other SCHEME://.
bool is_url(const std::string& text);

// `path`, or where it is a link whose target is gone but was packed, that
// target's store (TARGET.ptwm). In a packed Hugging Face cache a snapshot's
// model.safetensors links to ../../blobs/ETAG, which pack stored as
// blobs/ETAG.ptwm: inspect, verify and unpack of the link said only
// "cannot open: No such file or directory".
std::string local_store_path(const std::string& path);

// A store from a path (see local_store_path) or from a URL naming one store object.
std::unique_ptr<StoreReader> open_store(const std::string& path_or_url, const RemoteOptions& options = {});

// A packed tree at a URL: its object store and manifest.
struct RemoteTree {
    std::shared_ptr<remote::ObjectStore> store;
    remote::Manifest manifest;
    remote::ManifestVersion version;  // of the manifest read
    std::unique_ptr<StoreReader> open_store(const std::string& relative) const;
    // A plain file's bytes, in order, by range GETs of bounded size (a whole
    // GET capped what a response may hold): sink(offset, bytes) a block at a
    // time. Throws Error naming the object when its size is not `size`.
    void read(const std::string& relative, uint64_t size,
              const std::function<void(uint64_t, std::span<const uint8_t>)>& sink) const;
    std::vector<uint8_t> get(const std::string& relative, uint64_t size) const;
    // Throws Error when the tree was packed again since its manifest was
    // read: call after the last object was opened, before anything read is
    // kept (a tree re-packed meanwhile can have been read as a mix of two).
    void require_unchanged() const;
};
// Throws Error naming the URL when there is no manifest (not a packed tree).
RemoteTree open_remote_tree(const std::string& url, const RemoteOptions& options);
// Whether a URL names a single store object rather than a tree ("...NAME.ptwm").
bool url_names_store(const std::string& url);

}  // namespace ptwm::tool
