// HTTP on libcurl: requests with retries (backoff with full jitter on 5xx,
// 429, timeouts and resets, bounded by one deadline), S3 requests signed by
// libcurl's SigV4 (CURLOPT_AWS_SIGV4), and a pool of kept-alive handles
// shared by the threads that fetch.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ptwm/base/error.hpp"
#include "ptwm/remote/remote_stats.hpp"
#include "ptwm/remote/s3_config.hpp"

namespace ptwm::remote {

// A request that failed for good: an HTTP error, or the deadline passed
// while the server could not be reached. `transient` says which; `code` is
// S3's <Code> of an error answer ("NoSuchBucket"), or "".
class RemoteError : public Error {
public:
    RemoteError(const std::string& what, long status, bool transient, std::string code = "")
        : Error(what), status_(status), transient_(transient), code_(std::move(code)) {}
    long status() const { return status_; }
    bool transient() const { return transient_; }
    const std::string& code() const { return code_; }
    // The object is not there (its bucket is: S3 answers a missing bucket
    // with a 404 too).
    bool object_missing() const { return status_ == 404 && code_ != "NoSuchBucket"; }
    std::shared_ptr<const Error> clone() const override {
        return std::make_shared<RemoteError>(what(), status_, transient_, code_);
    }
    [[noreturn]] void throw_copy() const override { throw RemoteError(what(), status_, transient_, code_); }

private:
    long status_;
    bool transient_;
    std::string code_;
};

// An object answered with another ETag than the one it was opened with:
// it was replaced on the server. Its reads fail rather than mix versions;
// HttpSource has logged it once for the object, so callers need not log
// each failed read again.
class ObjectChanged : public RemoteError {
public:
    explicit ObjectChanged(const std::string& what) : RemoteError(what, 412, false) {}
    std::shared_ptr<const Error> clone() const override { return std::make_shared<ObjectChanged>(what()); }
    [[noreturn]] void throw_copy() const override { throw ObjectChanged(what()); }
};

struct RetryPolicy {
    double timeout_seconds = 60;  // the whole request, retries included
    double first_backoff_seconds = 0.1;
    double max_backoff_seconds = 4;
};

struct HttpRequest {
    std::string method = "GET";           // GET, HEAD, PUT, POST, DELETE
    std::string url;
    std::string what;                      // the name messages give (s3://..., a path)
    std::vector<std::string> headers;      // "Name: value"
    std::optional<std::pair<uint64_t, uint64_t>> range;  // bytes [first, last]
    std::span<const uint8_t> body;         // PUT and POST
    std::span<uint8_t> into;               // a 2xx body goes here when set (else to HttpResponse::body)
    // Clean-up (aborting a multipart upload) still goes out once the tool
    // was interrupted; every other request then stops (ptwm::Cancelled).
    bool runs_when_cancelled = false;
};

// The text of the first <TAG>...</TAG> in an S3 XML body, or "" (S3's
// answers are small and flat: no XML parser needed for Code, Message,
// UploadId).
std::string xml_field(const std::string& body, const std::string& tag);

struct HttpResponse {
    long status = 0;
    std::string etag;             // as sent, quotes included
    std::string last_modified;    // as sent: an object's version where the server gives no ETag
    uint64_t content_length = 0;  // of the response (HEAD: of the object); 0 when not sent
    bool length_known = false;    // a Content-Length was sent
    std::string body;             // a body not sent to `into` (errors, small answers)
    size_t received = 0;          // bytes written to `into`
    // S3's <Code> from an error body ("NoSuchKey", "InvalidAccessKeyId"), or "".
    std::string error_code() const;
};

class HttpClient {
public:
    // With an S3Config that has keys, every request is signed for its region.
    explicit HttpClient(std::optional<S3Config> s3 = std::nullopt, RetryPolicy policy = {});
    ~HttpClient();
    HttpClient(const HttpClient&) = delete;
    HttpClient& operator=(const HttpClient&) = delete;

    // Sends with retries; returns any response that is not worth retrying
    // (2xx-4xx). Throws RemoteError when the deadline passes on transient
    // failures. Thread-safe.
    HttpResponse send(const HttpRequest& request);
    // send(), then a RemoteError saying what went wrong for a status >= 300
    // (wrong credentials, no such object, changed object, ...).
    HttpResponse send_ok(const HttpRequest& request);
    // The error for a failed response (status >= 300), with its status and
    // S3 code: "WHAT: access denied (HTTP 403, InvalidAccessKeyId): ...".
    RemoteError failure(const HttpRequest& request, const HttpResponse& response) const;

    const std::optional<S3Config>& s3() const { return s3_; }
    const RetryPolicy& policy() const { return policy_; }
    RemoteStats& stats() { return *stats_; }
    std::shared_ptr<RemoteStats> shared_stats() const { return stats_; }

private:
    struct Attempt;
    std::string describe_failure(const HttpRequest& request, const HttpResponse& response) const;
    void* acquire_handle();
    void release_handle(void* handle);
    // What a failed attempt calls for: another attempt; failing now; or
    // failing now as an unreachable server does (a RemoteError that is
    // transient(), so a mount serves its disk cache, but not retried).
    enum class AfterFailure { kRetry, kFail, kFailUnreachable };
    // One attempt; fills `response` or sets `transport_error` and `after`.
    void perform(void* handle, const HttpRequest& request, double timeout_seconds, HttpResponse& response,
                 std::string& transport_error, AfterFailure& after);

    std::optional<S3Config> s3_;
    RetryPolicy policy_;
    // Certificates to trust instead of the system's (a private CA):
    // $AWS_CA_BUNDLE, else $CURL_CA_BUNDLE, else $SSL_CERT_FILE; "" for the system's.
    std::string ca_bundle_;
    std::shared_ptr<RemoteStats> stats_;
    std::mutex pool_mutex_;
    std::vector<void*> idle_handles_;
};

}  // namespace ptwm::remote
