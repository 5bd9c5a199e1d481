// Sizes on the command line: a number with an optional K, M or G suffix (powers of 1024).
#pragma once

#include <cstdint>
#include <string>

#include "command.hpp"

namespace ptwm::tool {

inline uint64_t parse_size(std::string text, const std::string& what) {
    uint64_t scale = 1;
    if (!text.empty()) {
        switch (text.back()) {
            case 'K': case 'k': scale = 1ull << 10; break;
            case 'M': case 'm': scale = 1ull << 20; break;
            case 'G': case 'g': scale = 1ull << 30; break;
            default: break;
        }
        if (scale != 1) text.pop_back();
    }
    return parse_count(text, what) * scale;
}

}  // namespace ptwm::tool
