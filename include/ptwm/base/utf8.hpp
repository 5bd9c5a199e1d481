// File names are bytes; JSON (the manifest, inspect --json) holds UTF-8
// text only. These tell the two apart and show a name that is not UTF-8 in
// an error message without sending raw bytes to the terminal.
#pragma once

#include <string>
#include <string_view>

namespace ptwm {

// Well-formed UTF-8 as RFC 3629 defines it (no overlong forms, no
// surrogates, nothing above U+10FFFF): the text a JSON writer accepts.
bool is_utf8(std::string_view text);

// `text` with each byte that is not part of a well-formed UTF-8 sequence,
// and each control character (C0, DEL and the C1 controls U+0080..U+009F,
// each of whose two bytes is shown), written as \xHH: "c\xfe.safetensors".
// Safe to send to a terminal: no escape sequence survives it.
std::string printable(std::string_view text);

}  // namespace ptwm
