#include "store/plain_header.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <utility>

namespace ptwm {
namespace {

// Nesting the metadata may have and still be skipped here (the JSON parser
// bounds it at 64 levels, the header's own included).
constexpr unsigned kMaxMetadataDepth = 16;
// Decimal digits a number may have: 19 always fit 64 bits.
constexpr unsigned kMaxDigits = 19;

std::atomic<bool> g_allowed{true};

class Scanner {
public:
    explicit Scanner(std::string_view s) : p_(s.data()), end_(s.data() + s.size()) {}

    bool at_end() const { return p_ == end_; }

    void skip_space() {
        while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
    }
    // The next character, after any white space, if it is `c`.
    bool take(char c) {
        skip_space();
        if (p_ == end_ || *p_ != c) return false;
        ++p_;
        return true;
    }
    bool peek(char c) {
        skip_space();
        return p_ != end_ && *p_ == c;
    }

    // A string of printable ASCII without escapes, its contents in `out`.
    bool plain_string(std::string_view& out) { return ascii_string(out, false); }

    // An unsigned integer as JSON writes it (no sign, fraction, exponent or
    // leading zero) of at most kMaxDigits digits.
    bool small_unsigned(uint64_t& out) {
        skip_space();
        const char* const from = p_;
        uint64_t v = 0;
        while (p_ != end_ && *p_ >= '0' && *p_ <= '9') v = v * 10 + static_cast<uint64_t>(*p_++ - '0');
        const auto digits = static_cast<size_t>(p_ - from);
        if (digits == 0 || digits > kMaxDigits || (digits > 1 && *from == '0')) return false;
        if (p_ != end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) return false;
        out = v;
        return true;
    }

    // [n, n, ...] of small_unsigned.
    bool unsigned_array(std::vector<uint64_t>& out) {
        if (!take('[')) return false;
        if (take(']')) return true;
        do {
            uint64_t v;
            if (!small_unsigned(v)) return false;
            out.push_back(v);
        } while (take(','));
        return take(']');
    }

    // An object's extent, not checked beyond its brackets and strings: the
    // JSON parser reads it afterwards.
    bool skip_object(std::string_view& out) {
        if (!peek('{')) return false;
        const char* const from = p_;
        unsigned depth = 0;
        do {
            const char c = *p_++;
            if (c == '"') {
                for (; p_ != end_ && *p_ != '"'; ++p_)
                    if (*p_ == '\\' && ++p_ == end_) return false;
                if (p_ == end_) return false;
                ++p_;
            } else if (c == '{' || c == '[') {
                if (++depth > kMaxMetadataDepth) return false;
            } else if (c == '}' || c == ']') {
                if (depth == 0) return false;
                --depth;
            }
        } while (depth != 0 && p_ != end_);
        if (depth != 0) return false;
        out = {from, static_cast<size_t>(p_ - from)};
        return true;
    }

    // An object of string members, ASCII, whose only escapes are those the
    // JSON library writes back as they are (\" \\ \b \f \n \r \t), each
    // key once and without escapes: written in `out` as the library dumps
    // it (keys in order, no white space), which is then the text as it is,
    // reordered. Anything else: false, and the scan is back where it was.
    bool string_object(std::string& out) {
        const char* const start = p_;
        std::vector<std::pair<std::string_view, std::string_view>> members;
        const auto fail = [&] {
            p_ = start;
            return false;
        };
        if (!take('{')) return fail();
        if (!take('}')) {
            do {
                std::string_view key, value;
                if (!plain_string(key) || !take(':') || !escaped_string(value)) return fail();
                members.emplace_back(key, value);
            } while (take(','));
            if (!take('}')) return fail();
        }
        std::sort(members.begin(), members.end());
        for (size_t k = 1; k < members.size(); ++k)
            if (members[k].first == members[k - 1].first) return fail();
        size_t length = 2;
        for (const auto& [key, value] : members) length += key.size() + value.size() + 6;
        out.clear();
        out.reserve(length);
        out.push_back('{');
        for (const auto& [key, value] : members) {
            if (out.size() > 1) out.push_back(',');
            out.push_back('"');
            out.append(key);
            out.append("\":\"");
            out.append(value);
            out.push_back('"');
        }
        out.push_back('}');
        return true;
    }

    // A string of printable ASCII and the escapes string_object allows, its
    // text (escapes as written) in `out`.
    bool escaped_string(std::string_view& out) { return ascii_string(out, true); }

    // {"dtype": ..., "shape": [...], "data_offsets": [b, e]}, each once, in any order.
    bool tensor_entry(PlainTensorEntry& t) {
        if (!take('{')) return false;
        bool dtype = false, shape = false, offsets = false;
        do {
            std::string_view key;
            if (!plain_string(key) || !take(':')) return false;
            if (key == "dtype" && !dtype) {
                dtype = plain_string(t.dtype);
                if (!dtype) return false;
            } else if (key == "shape" && !shape) {
                shape = unsigned_array(t.shape);
                if (!shape) return false;
            } else if (key == "data_offsets" && !offsets) {
                std::vector<uint64_t> pair;
                if (!unsigned_array(pair) || pair.size() != 2) return false;
                t.begin = pair[0], t.end = pair[1];
                offsets = true;
            } else {
                return false;
            }
        } while (take(','));
        return take('}') && dtype && shape && offsets;
    }

private:
    // A string of printable ASCII, with (`escapes`) or without the escapes
    // that the JSON library writes back as they are: \" \\ \b \f \n \r \t.
    bool ascii_string(std::string_view& out, bool escapes) {
        if (!take('"')) return false;
        const char* const from = p_;
        while (p_ != end_) {
            const auto c = static_cast<unsigned char>(*p_);
            if (c == '"') {
                out = {from, static_cast<size_t>(p_ - from)};
                ++p_;
                return true;
            }
            if (c < 0x20 || c >= 0x80) return false;
            if (c == '\\') {
                if (!escapes || ++p_ == end_ || *p_ == 0 || std::strchr("\"\\bfnrt", *p_) == nullptr) return false;
            }
            ++p_;
        }
        return false;
    }

    const char* p_;
    const char* const end_;
};

}  // namespace

std::optional<PlainHeader> scan_plain_header(std::string_view json) {
    if (!g_allowed.load(std::memory_order_relaxed)) return std::nullopt;
    Scanner s(json);
    PlainHeader h;
    if (!s.take('{')) return std::nullopt;
    if (!s.take('}')) {
        do {
            std::string_view name;
            if (!s.plain_string(name) || !s.take(':')) return std::nullopt;
            if (name == "__metadata__") {
                if (!s.string_object(h.metadata_json) && !s.skip_object(h.metadata)) return std::nullopt;
                ++h.metadata_count;
                continue;
            }
            PlainTensorEntry& t = h.tensors.emplace_back();
            t.name = name;
            if (!s.tensor_entry(t)) return std::nullopt;
        } while (s.take(','));
        if (!s.take('}')) return std::nullopt;
    }
    s.skip_space();
    if (!s.at_end()) return std::nullopt;
    return h;
}

void allow_plain_header_scan(bool allowed) { g_allowed.store(allowed, std::memory_order_relaxed); }

}  // namespace ptwm
