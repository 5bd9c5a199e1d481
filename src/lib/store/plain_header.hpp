// The plain form of a safetensors header, read without a JSON library.
//
// Almost every header is a flat object of tensor entries, each
// {"dtype": "...", "shape": [...], "data_offsets": [b, e]} with ASCII names
// and no escapes, and perhaps a "__metadata__" object. nlohmann's lexer
// takes such a header a character at a time, with a copy of each token for
// its error messages: some 20 ns a byte, 1.0-1.2 ms of a 51 KB header
// (movenet MXFP4), 4% of packing that small model. This scanner reads that form
// only and says "not plain" for anything else -- escapes, non-ASCII bytes,
// numbers that are not small unsigned integers, other keys, repeated keys
// in an entry, anything out of place -- so that the JSON parser reads it
// as before and reports what is wrong in its own words. It never decides
// that a header is bad.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ptwm {

struct PlainTensorEntry {
    std::string_view name;   // as in the JSON text (no escapes)
    std::string_view dtype;
    std::vector<uint64_t> shape;
    uint64_t begin = 0, end = 0;  // data_offsets
};

struct PlainHeader {
    std::vector<PlainTensorEntry> tensors;  // in the order of the text
    // The "__metadata__" member: where it is an object of plain strings
    // (the safetensors convention, string to string), the text the JSON
    // library would dump it as, in `metadata_json`; else its text as it
    // is, unparsed, in `metadata`, for the JSON parser. Both empty when absent.
    std::string metadata_json;
    std::string_view metadata;
    unsigned metadata_count = 0;  // more than one: a duplicate, which only the JSON parser reports
};

// The header's JSON text in the plain form, or nullopt when it is not in it
// (or the scan is switched off).
std::optional<PlainHeader> scan_plain_header(std::string_view json);
// Tests: false makes every header "not plain", so that the JSON parser
// reads them all (default: true).
void allow_plain_header_scan(bool allowed);

}  // namespace ptwm
