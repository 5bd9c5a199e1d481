#include "ptwm/base/utf8.hpp"

#include <cstdint>
#include <cstdio>

namespace ptwm {
namespace {

// The length of the well-formed UTF-8 sequence at text[at], or 0 when the
// byte there starts none (RFC 3629, table 3-7 of the Unicode standard).
size_t sequence_length(std::string_view text, size_t at) {
    const auto byte = [&](size_t i) { return at + i < text.size() ? static_cast<uint8_t>(text[at + i]) : 0; };
    const auto in = [](uint8_t b, uint8_t lo, uint8_t hi) { return b >= lo && b <= hi; };
    const uint8_t b0 = byte(0);
    if (b0 < 0x80) return 1;
    if (in(b0, 0xC2, 0xDF)) return in(byte(1), 0x80, 0xBF) ? 2 : 0;
    if (in(b0, 0xE0, 0xEF)) {
        // E0 would be overlong below A0; ED above 9F would be a surrogate.
        const uint8_t lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
        return in(byte(1), lo, hi) && in(byte(2), 0x80, 0xBF) ? 3 : 0;
    }
    if (in(b0, 0xF0, 0xF4)) {
        // F0 would be overlong below 90; F4 above 8F would pass U+10FFFF.
        const uint8_t lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
        return in(byte(1), lo, hi) && in(byte(2), 0x80, 0xBF) && in(byte(3), 0x80, 0xBF) ? 4 : 0;
    }
    return 0;  // a continuation byte, C0, C1 or F5 and above
}

}  // namespace

bool is_utf8(std::string_view text) {
    for (size_t at = 0; at < text.size();) {
        const size_t n = sequence_length(text, at);
        if (n == 0) return false;
        at += n;
    }
    return true;
}

std::string printable(std::string_view text) {
    std::string out;
    const auto escape = [&](uint8_t b) {
        char hex[5];
        std::snprintf(hex, sizeof hex, "\\x%02x", b);
        out += hex;
    };
    for (size_t at = 0; at < text.size();) {
        const size_t n = sequence_length(text, at);
        const auto b = static_cast<uint8_t>(text[at]);
        if (n == 0 || b < 0x20 || b == 0x7F) {
            escape(b);
            ++at;
        } else if (b == 0xC2 && static_cast<uint8_t>(text[at + 1]) <= 0x9F) {
            // U+0080..U+009F, the C1 controls: U+009B is a terminal's CSI
            // as ESC [ is, so each of their two bytes is shown.
            escape(b);
            escape(static_cast<uint8_t>(text[at + 1]));
            at += 2;
        } else {
            out.append(text, at, n);
            at += n;
        }
    }
    return out;
}

}  // namespace ptwm
