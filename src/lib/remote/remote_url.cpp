#include "ptwm/remote/remote_url.hpp"

#include <cctype>

#include "ptwm/base/error.hpp"

namespace ptwm::remote {
namespace {

std::string join(const std::string& base, const std::string& relative) {
    if (base.empty()) return relative;
    if (relative.empty()) return base;
    return base.back() == '/' ? base + relative : base + "/" + relative;
}

}  // namespace

std::optional<RemoteUrl> parse_remote_url(const std::string& text) {
    if (!is_remote_url(text)) return std::nullopt;
    RemoteUrl u;
    u.text = text;
    if (text.rfind("s3://", 0) == 0) {
        u.scheme = RemoteUrl::Scheme::kS3;
        const std::string rest = text.substr(5);
        const auto slash = rest.find('/');
        u.bucket = rest.substr(0, slash);
        if (u.bucket.empty()) throw Error(text + ": an s3:// URL needs a bucket: s3://BUCKET/PREFIX");
        u.path = slash == std::string::npos ? "" : rest.substr(slash + 1);
    } else {
        u.scheme = RemoteUrl::Scheme::kHttp;
        const auto host_begin = text.find("://") + 3;
        if (host_begin >= text.size() || text[host_begin] == '/') throw Error(text + ": the URL has no host");
        u.path = text;
        if (text.find('/', host_begin) == std::string::npos) u.path += "/";
    }
    return u;
}

std::string unsupported_url_scheme(const std::string& text) {
    const auto end = text.find("://");
    if (end == std::string::npos || end == 0 || is_remote_url(text)) return "";
    // RFC 3986: a letter, then letters, digits, '+', '-' and '.'.
    if (!std::isalpha(static_cast<unsigned char>(text[0]))) return "";
    for (size_t i = 1; i < end; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (!std::isalnum(c) && c != '+' && c != '-' && c != '.') return "";
    }
    return text.substr(0, end);
}

RemoteUrl RemoteUrl::child(const std::string& relative) const {
    RemoteUrl c = *this;
    // An s3 path is a key (signed and escaped when sent); an http path is a URL.
    c.path = join(path, is_s3() ? relative : escape_key(relative));
    c.text = join(text, relative);
    return c;
}

std::string RemoteUrl::leaf() const {
    if (path.empty() || path.back() == '/') return "";
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string escape_key(const std::string& key) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : key) {
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
            c == '.' || c == '~' || c == '/') {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

}  // namespace ptwm::remote
