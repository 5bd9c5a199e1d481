// A store keeps its original's name with ".ptwm" appended. One definition
// for the library (the manifest tells stores from copied files by it) and
// the tool (pack, unpack and verify pair stores with their originals).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace ptwm {

inline constexpr std::string_view kStoreSuffix = ".ptwm";

inline bool is_store_name(const std::filesystem::path& p) {
    const std::string s = p.filename().string();
    return s.size() > kStoreSuffix.size() && s.compare(s.size() - kStoreSuffix.size(), kStoreSuffix.size(), kStoreSuffix) == 0;
}

// "dir/model.safetensors.ptwm" -> "dir/model.safetensors"; other names unchanged.
inline std::filesystem::path original_name(const std::filesystem::path& p) {
    if (!is_store_name(p)) return p;
    const std::string s = p.string();
    return s.substr(0, s.size() - kStoreSuffix.size());
}

}  // namespace ptwm
