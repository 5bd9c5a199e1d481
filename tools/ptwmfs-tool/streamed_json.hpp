// A JSON document printed with its long arrays made one element at a time:
// the bytes nlohmann's dump(2) prints for the whole document, without the
// whole document in memory. inspect's document of a store of 100,000 small
// tensors took about 550 MB as nlohmann values, for 127 MB of text.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <nlohmann/json.hpp>

namespace ptwm::tool {

// A top-level array of `size` elements; element(i) makes the i-th when it
// is printed, and it is let go once printed.
struct StreamedArray {
    size_t size = 0;
    std::function<nlohmann::json(size_t i)> element;
};

// Prints the object `doc` and a newline to `out`, byte for byte as
// doc.dump(2, ' ', false, error_handler_t::replace) would (a byte that is
// not UTF-8 shows as U+FFFD), except that each member named in `arrays`,
// which `doc` holds as a placeholder so that it keeps its sorted place, is
// printed as that array.
void print_json(std::FILE* out, const nlohmann::json& doc, const std::map<std::string, StreamedArray>& arrays);

}  // namespace ptwm::tool
