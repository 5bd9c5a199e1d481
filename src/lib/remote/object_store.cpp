#include "ptwm/remote/object_store.hpp"

namespace ptwm::remote {

ObjectStore::ObjectStore(const RemoteUrl& root, const S3Overrides& overrides, RetryPolicy policy,
                         FetchAheadOptions fetch_ahead)
    : root_(root), fetch_ahead_(fetch_ahead) {
    std::optional<S3Config> s3;
    if (root.is_s3()) s3 = S3Config::load(overrides);
    client_ = std::make_unique<HttpClient>(std::move(s3), policy);
}

HttpRequest ObjectStore::request(const std::string& method, const RemoteUrl& object) const {
    HttpRequest r;
    r.method = method;
    r.url = object.is_s3() ? client_->s3()->object_url(object.bucket, object.path) : object.path;
    r.what = object.text;
    return r;
}

ObjectInfo ObjectStore::head(const RemoteUrl& object) {
    const HttpResponse resp = client_->send_ok(request("HEAD", object));
    // (Unsaid, the size would read as 0: "shorter than a superblock".)
    if (!resp.length_known) throw RemoteError(object.text + ": the server's HEAD gave no Content-Length, so no size", 0, false);
    return {resp.content_length, resp.etag, resp.last_modified};
}

bool ObjectStore::exists(const RemoteUrl& object) {
    const HttpRequest r = request("HEAD", object);
    const HttpResponse resp = client_->send(r);
    if (resp.status == 404) return false;
    if (resp.status >= 300) throw client_->failure(r, resp);
    return true;
}

void ObjectStore::remove(const RemoteUrl& object) {
    if (!object.is_s3()) throw Error(object.text + ": deletes go to s3:// URLs only");
    client_->send_ok(request("DELETE", object));
}

std::vector<uint8_t> ObjectStore::get(const RemoteUrl& object) {
    const HttpResponse resp = client_->send_ok(request("GET", object));
    return {resp.body.begin(), resp.body.end()};
}

void ObjectStore::put(const RemoteUrl& object, std::span<const uint8_t> bytes) {
    if (!object.is_s3()) throw Error(object.text + ": uploads go to s3:// URLs only");
    HttpRequest r = request("PUT", object);
    r.body = bytes;
    client_->send_ok(r);
}

}  // namespace ptwm::remote
