#include "ptwm/remote/http_client.hpp"

#include "remote/curl_library.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "ptwm/base/cancellation.hpp"

namespace ptwm::remote {
namespace {

struct Transfer {
    const HttpRequest* request;
    HttpResponse* response;
    CURL* handle;
    bool overflow = false;
    size_t sent = 0;
};

size_t on_body(char* data, size_t, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    long status = 0;
    curl().easy_getinfo(t->handle, CURLINFO_RESPONSE_CODE, &status);
    if (!t->request->into.empty() && status >= 200 && status < 300) {
        auto& r = *t->response;
        if (r.received + n > t->request->into.size()) {
            t->overflow = true;
            return 0;  // more than asked for: abort the transfer
        }
        std::memcpy(t->request->into.data() + r.received, data, n);
        r.received += n;
    } else {
        if (t->response->body.size() + n > (64u << 20)) {
            t->overflow = true;
            return 0;
        }
        t->response->body.append(data, n);
    }
    return n;
}

// libcurl asks this several times a second during a transfer: a
// cancelled run (the tool's SIGINT) stops its uploads and downloads at once
// instead of when they end or time out.
int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    const auto* t = static_cast<const Transfer*>(user);
    return !t->request->runs_when_cancelled && cancellation_requested() ? 1 : 0;
}

std::string header_value(CURL* handle, const char* name) {
    struct curl_header* h = nullptr;
    if (curl().easy_header(handle, name, 0, CURLH_HEADER, -1, &h) == CURLHE_OK && h && h->value) return h->value;
    return "";
}

// The host (and port) of a URL, said with a failure to resolve it or to
// connect to it: the message names the object by the URL the user gave
// (s3://BUCKET/KEY), and a virtual-hosted request goes to BUCKET.ENDPOINT,
// a name the user never wrote.
std::string url_authority(const std::string& url) {
    const size_t scheme = url.find("://");
    const size_t from = scheme == std::string::npos ? 0 : scheme + 3;
    const size_t end = url.find_first_of("/?#", from);
    return url.substr(from, end == std::string::npos ? std::string::npos : end - from);
}

bool retryable_curl_error(CURLcode code) {
    switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
        return true;
    default:
        return false;
    }
}

// Whether the resolver answers that `authority`'s host name does not exist
// (EAI_NONAME: NXDOMAIN, or no such name in /etc/hosts), rather than that it
// could not answer now (EAI_AGAIN: no DNS server reached). curl says "Couldn't
// resolve host name" for both; only the second is worth retrying until the
// deadline, and a mistyped endpoint or bucket would otherwise wait all of
// remote_timeout (60 s) to be told so. Asked only after curl failed.
bool resolver_says_no_such_name(const std::string& authority) {
    std::string host = authority.substr(authority.rfind('@') == std::string::npos ? 0 : authority.rfind('@') + 1);
    if (!host.empty() && host[0] == '[') return false;  // an IPv6 literal: nothing to resolve
    host = host.substr(0, host.find(':'));
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
    if (found) ::freeaddrinfo(found);
    return rc == EAI_NONAME;
}

bool retryable_status(long status) { return status == 429 || status == 408 || (status >= 500 && status < 600); }

}  // namespace

std::string xml_field(const std::string& body, const std::string& tag) {
    const auto b = body.find("<" + tag + ">");
    if (b == std::string::npos) return "";
    const auto start = b + tag.size() + 2;
    const auto e = body.find("</" + tag + ">", start);
    return e == std::string::npos ? "" : body.substr(start, e - start);
}

std::string HttpResponse::error_code() const { return xml_field(body, "Code"); }

HttpClient::HttpClient(std::optional<S3Config> s3, RetryPolicy policy)
    : s3_(std::move(s3)), policy_(policy), stats_(std::make_shared<RemoteStats>()) {
    curl();  // loaded now: a missing libcurl is an error at open, not at the first read
    for (const char* name : {"AWS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"}) {
        const char* value = std::getenv(name);
        if (value != nullptr && *value != '\0') {
            ca_bundle_ = value;
            break;
        }
    }
}

HttpClient::~HttpClient() {
    for (void* h : idle_handles_) curl().easy_cleanup(static_cast<CURL*>(h));
}

void* HttpClient::acquire_handle() {
    {
        std::lock_guard lock(pool_mutex_);
        if (!idle_handles_.empty()) {
            void* h = idle_handles_.back();
            idle_handles_.pop_back();
            return h;
        }
    }
    CURL* h = curl().easy_init();
    if (!h) throw Error("libcurl: cannot create a handle");
    return h;
}

void HttpClient::release_handle(void* handle) {
    std::lock_guard lock(pool_mutex_);
    idle_handles_.push_back(handle);  // keeps its connection alive for the next request
}

void HttpClient::perform(void* raw, const HttpRequest& req, double timeout_seconds, HttpResponse& resp,
                         std::string& transport_error, AfterFailure& after) {
    CURL* h = static_cast<CURL*>(raw);
    const CurlLibrary& c = curl();
    c.easy_reset(h);
    Transfer t{&req, &resp, h};
    resp = HttpResponse{};
    c.easy_setopt(h, CURLOPT_URL, req.url.c_str());
    c.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    c.easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    c.easy_setopt(h, CURLOPT_WRITEDATA, &t);
    c.easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    c.easy_setopt(h, CURLOPT_XFERINFODATA, &t);
    c.easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    c.easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max(1.0, timeout_seconds * 1000)));
    c.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::clamp(timeout_seconds * 1000, 1.0, 10000.0)));
    // A transfer that stalls (a server gone mid-body) is cut and retried.
    c.easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    c.easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(std::clamp(timeout_seconds, 1.0, 10.0)));
    c.easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    if (!ca_bundle_.empty()) c.easy_setopt(h, CURLOPT_CAINFO, ca_bundle_.c_str());
    c.easy_setopt(h, CURLOPT_ACCEPT_ENCODING, nullptr);  // bytes as stored, never re-encoded
    // An https:// tree may sit behind redirects (a CDN's signed URLs);
    // libcurl keeps the range and sends no credentials to another host. S3
    // requests are signed for one URL: a redirect there is an error, named.
    if (!s3_) {
        c.easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
        c.easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    }
    std::string range;
    if (req.range) {
        range = std::to_string(req.range->first) + "-" + std::to_string(req.range->second);
        c.easy_setopt(h, CURLOPT_RANGE, range.c_str());
    }
    struct curl_slist* headers = nullptr;
    for (const auto& line : req.headers) headers = c.slist_append(headers, line.c_str());
    std::string userpwd, sigv4;
    if (s3_ && s3_->signs()) {
        sigv4 = "aws:amz:" + s3_->region + ":s3";
        userpwd = s3_->access_key + ":" + s3_->secret_key;
        c.easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
        c.easy_setopt(h, CURLOPT_USERPWD, userpwd.c_str());
        // S3 wants the payload's hash in a signed header; libcurl 7.88 sends
        // none, and a body's integrity is checked by TCP/TLS and our checksums.
        headers = c.slist_append(headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
        if (!s3_->session_token.empty())
            headers = c.slist_append(headers, ("x-amz-security-token: " + s3_->session_token).c_str());
    }
    if (req.method == "HEAD") {
        c.easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (req.method == "PUT" || req.method == "POST") {
        // The body as POST fields (libcurl then hashes it for the signature);
        // PUT is the same transfer with another verb.
        c.easy_setopt(h, CURLOPT_POSTFIELDS, reinterpret_cast<const char*>(req.body.data()));
        c.easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
        if (req.method == "PUT") c.easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
        // (No "Expect:" override: libcurl 7.88 signs the emptied header it
        // then leaves out, and the server's signature differs.)
        headers = c.slist_append(headers, "Content-Type: application/octet-stream");
    } else if (req.method != "GET") {
        c.easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    }
    c.easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    const auto start = std::chrono::steady_clock::now();
    const CURLcode code = c.easy_perform(h);
    c.slist_free_all(headers);
    stats_->requests.fetch_add(1, std::memory_order_relaxed);
    stats_->record_latency(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    curl_off_t down = 0, up = 0;
    c.easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &down);
    c.easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &up);
    stats_->bytes_fetched.fetch_add(static_cast<uint64_t>(down), std::memory_order_relaxed);
    stats_->bytes_sent.fetch_add(static_cast<uint64_t>(up), std::memory_order_relaxed);
    if (t.overflow) {
        long status = 0;
        c.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        transport_error = req.range && status == 200
                              ? "the server ignored the byte range and sent the whole object (HTTP 200, not 206 Partial "
                                "Content): ptwmfs reads stores by range requests, which this server does not serve"
                              : "the server sent more bytes than asked for";
        after = AfterFailure::kFail;
        return;
    }
    if (code != CURLE_OK) {
        transport_error = c.easy_strerror(code);
        if (code == CURLE_COULDNT_RESOLVE_HOST || code == CURLE_COULDNT_CONNECT)
            transport_error += " (" + url_authority(req.url) + ")";
        after = retryable_curl_error(code) ? AfterFailure::kRetry : AfterFailure::kFail;
        if (code == CURLE_COULDNT_RESOLVE_HOST && resolver_says_no_such_name(url_authority(req.url))) {
            transport_error += ": the resolver says no such name";
            after = AfterFailure::kFailUnreachable;
        }
        return;
    }
    c.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp.status);
    resp.etag = header_value(h, "ETag");
    resp.last_modified = header_value(h, "Last-Modified");
    curl_off_t length = -1;
    c.easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
    resp.length_known = length >= 0;
    resp.content_length = length < 0 ? 0 : static_cast<uint64_t>(length);
    after = retryable_status(resp.status) ? AfterFailure::kRetry : AfterFailure::kFail;
    if (after == AfterFailure::kRetry) transport_error = "HTTP " + std::to_string(resp.status);
    // A part answered for a range must be that range: bytes from elsewhere
    // would be taken for it (and kept in the disk cache) whatever their length.
    if (req.range && resp.status == 206) {
        const std::string got = header_value(h, "Content-Range");
        unsigned long long first = 0, last = 0;
        char slash = 0;
        const bool parsed = std::sscanf(got.c_str(), "bytes %llu-%llu%c", &first, &last, &slash) == 3 && slash == '/';
        if (!parsed || first != req.range->first || last > req.range->second || last - first + 1 != resp.received) {
            transport_error = "the server answered the byte range " + std::to_string(req.range->first) + "-" +
                              std::to_string(req.range->second) + " with " +
                              (got.empty() ? std::string("no Content-Range") : "'" + got + "'") + " and " +
                              std::to_string(resp.received) + " bytes";
            after = AfterFailure::kRetry;  // as a server error: the next answer may be right
        }
    }
}

HttpResponse HttpClient::send(const HttpRequest& req) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + std::chrono::duration<double>(policy_.timeout_seconds);
    thread_local std::minstd_rand jitter(std::random_device{}());
    std::string last_error;
    const auto check_cancelled = [&] {
        if (!req.runs_when_cancelled) throw_if_cancelled();
    };
    for (unsigned attempt = 0;; ++attempt) {
        check_cancelled();
        const double remaining = std::chrono::duration<double>(deadline - clock::now()).count();
        if (remaining <= 0) {
            stats_->failures.fetch_add(1, std::memory_order_relaxed);
            throw RemoteError(req.what + ": " + req.method + " failed after " + std::to_string(attempt) + " attempt(s) in " +
                                  std::to_string(static_cast<int>(policy_.timeout_seconds + 0.5)) + " s: " + last_error,
                              0, true);
        }
        void* handle = acquire_handle();
        HttpResponse resp;
        std::string error;
        AfterFailure after = AfterFailure::kFail;
        try {
            perform(handle, req, remaining, resp, error, after);
        } catch (...) {
            release_handle(handle);
            throw;
        }
        release_handle(handle);
        check_cancelled();  // (a transfer the progress callback cut is no server's failure)
        if (error.empty()) return resp;
        if (after != AfterFailure::kRetry) {
            stats_->failures.fetch_add(1, std::memory_order_relaxed);
            throw RemoteError(req.what + ": " + req.method + " failed: " + error, resp.status,
                              after == AfterFailure::kFailUnreachable);
        }
        last_error = error;
        stats_->retries.fetch_add(1, std::memory_order_relaxed);
        const double cap = std::min(policy_.max_backoff_seconds, policy_.first_backoff_seconds * std::ldexp(1.0, std::min(attempt, 16u)));
        const double left = std::chrono::duration<double>(deadline - clock::now()).count();
        const double sleep = std::min(std::uniform_real_distribution<double>(cap / 4, cap)(jitter), std::max(0.0, left));
        // In slices, so that an interrupt is seen within a tenth of a second.
        const auto until = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(sleep));
        while (clock::now() < until) {
            check_cancelled();
            std::this_thread::sleep_for(std::min<clock::duration>(until - clock::now(), std::chrono::milliseconds(100)));
        }
    }
}

std::string HttpClient::describe_failure(const HttpRequest& req, const HttpResponse& resp) const {
    const std::string code = resp.error_code();
    const std::string message = xml_field(resp.body, "Message");
    std::string what = req.what + ": HTTP " + std::to_string(resp.status) + (code.empty() ? "" : " " + code);
    if (!message.empty()) what += " (" + message + ")";
    if ((resp.status == 403 || resp.status == 401) && !s3_) {
        what += ": access denied by the server";
    } else if (resp.status == 403 || resp.status == 401) {
        const bool credentials = code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" ||
                                 code == "InvalidToken" || code == "ExpiredToken" || code == "AccessDenied" || code.empty();
        what += credentials ? ": access denied, the credentials are wrong or lack permission" : ": access denied";
        if (s3_) what += " (credentials from " + s3_->credentials_from + ", region " + s3_->region + ")";
    } else if (resp.status == 404) {
        what += code == "NoSuchBucket" ? ": no such bucket" : ": no such object";
    } else if (resp.status == 412) {
        what += ": the object changed since it was opened";
    } else if (resp.status >= 300 && resp.status < 400) {
        what += s3_ ? ": a redirect, which signed S3 requests do not follow (is the endpoint or region right?)"
                    : ": more redirects than the 5 followed, or one with no Location";
    }
    return what;
}

RemoteError HttpClient::failure(const HttpRequest& req, const HttpResponse& resp) const {
    return RemoteError(describe_failure(req, resp), resp.status, false, resp.error_code());
}

HttpResponse HttpClient::send_ok(const HttpRequest& req) {
    HttpResponse resp = send(req);
    if (resp.status >= 300) throw failure(req, resp);
    return resp;
}

}  // namespace ptwm::remote
