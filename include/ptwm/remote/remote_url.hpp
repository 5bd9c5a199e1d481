// Where a remote store lives: "s3://BUCKET/PREFIX" or "https://HOST/PATH/"
// (plain "http://" too, for servers on loopback). A local path is none.
#pragma once

#include <optional>
#include <string>

namespace ptwm::remote {

struct RemoteUrl {
    enum class Scheme { kS3, kHttp };
    Scheme scheme = Scheme::kHttp;
    std::string bucket;  // s3 only
    // s3: the key prefix (no leading '/'); http: the whole URL.
    std::string path;
    std::string text;    // as the user wrote it, for messages

    bool is_s3() const { return scheme == Scheme::kS3; }
    // The URL of `relative` below this one ("a/b.ptwm" under "s3://b/p" is "s3://b/p/a/b.ptwm").
    RemoteUrl child(const std::string& relative) const;
    // The last path segment ("model.safetensors.ptwm"), empty for a directory URL.
    std::string leaf() const;
};

// nullopt for a local path; throws Error for a malformed URL (no bucket).
std::optional<RemoteUrl> parse_remote_url(const std::string& text);
inline bool is_remote_url(const std::string& text) {
    return text.rfind("s3://", 0) == 0 || text.rfind("https://", 0) == 0 || text.rfind("http://", 0) == 0;
}

// The scheme of a SCHEME://... that is_remote_url does not take ("ftp"),
// else "": such a text would otherwise be taken for a relative path and
// fail as a missing file. (./ftp://x is a path, should one be wanted.)
std::string unsupported_url_scheme(const std::string& text);

// RFC 3986 percent-encoding of an object key, keeping '/' between segments.
std::string escape_key(const std::string& key);

}  // namespace ptwm::remote
