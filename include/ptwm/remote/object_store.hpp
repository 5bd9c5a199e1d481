// A place holding a packed tree: an S3 bucket and prefix, or an HTTP(S)
// directory. Names objects relative to that root and does the requests a
// store needs: HEAD (size, ETag), range GET, whole GET, PUT, DELETE.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ptwm/remote/fetch_pool.hpp"
#include "ptwm/remote/http_client.hpp"
#include "ptwm/remote/remote_url.hpp"

namespace ptwm::remote {

struct ObjectInfo {
    uint64_t size = 0;
    std::string etag;
    std::string last_modified;
    // What tells one version of the object from another in cache keys: its
    // ETag, or where the server sends none its size and Last-Modified.
    std::string version() const {
        return etag.empty() ? "size " + std::to_string(size) + ", modified " + last_modified : etag;
    }
};

class ObjectStore {
public:
    // Throws Error for a malformed URL or an https:// root asked to take uploads.
    // `fetch_ahead`: how the HttpSources opened on this store fetch ahead
    // of sequential readers.
    ObjectStore(const RemoteUrl& root, const S3Overrides& overrides, RetryPolicy policy,
                FetchAheadOptions fetch_ahead = {});

    const RemoteUrl& root() const { return root_; }
    HttpClient& client() { return *client_; }
    const FetchAheadOptions& fetch_ahead() const { return fetch_ahead_; }
    // An object below the root ("" is the root itself, for a single store's URL).
    RemoteUrl object(const std::string& relative) const { return relative.empty() ? root_ : root_.child(relative); }
    // A request for `object`, named in messages by its s3:// or https:// URL.
    HttpRequest request(const std::string& method, const RemoteUrl& object) const;

    ObjectInfo head(const RemoteUrl& object);
    // HEAD, with "no such object" an answer rather than an error: false for
    // 404, RemoteError for any other failure (credentials, bucket, network).
    bool exists(const RemoteUrl& object);
    // DELETE (S3 answers the same whether or not the object was there).
    void remove(const RemoteUrl& object);
    std::vector<uint8_t> get(const RemoteUrl& object);
    void put(const RemoteUrl& object, std::span<const uint8_t> bytes);

private:
    RemoteUrl root_;
    std::unique_ptr<HttpClient> client_;
    FetchAheadOptions fetch_ahead_;
};

}  // namespace ptwm::remote
