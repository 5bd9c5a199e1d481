// Sizes as people write them on command lines and in mount options: a
// decimal number with an optional K, M or G suffix (powers of 1024).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ptwm {

// nullopt for anything else, or on overflow.
std::optional<uint64_t> parse_size(std::string_view text);

}  // namespace ptwm
