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

// Whether the mount shows a store of this file name under its original's
// name: not `.ptwm`, `..ptwm` or `...ptwm`, which would be shown as
// nothing, `.` or `..` (the mount shows them as they are).
inline bool shows_as_store(std::string_view filename) {
    if (filename.size() <= kStoreSuffix.size() || !filename.ends_with(kStoreSuffix)) return false;
    const std::string_view shown = filename.substr(0, filename.size() - kStoreSuffix.size());
    return shown != "." && shown != "..";
}

// "model.safetensors.ptwm" -> "model.safetensors", for a name shows_as_store takes.
inline std::string_view shown_store_name(std::string_view filename) {
    return filename.substr(0, filename.size() - kStoreSuffix.size());
}

// "dir/model.safetensors.ptwm" -> "dir/model.safetensors"; other names unchanged.
inline std::filesystem::path original_name(const std::filesystem::path& p) {
    if (!is_store_name(p)) return p;
    const std::string s = p.string();
    return s.substr(0, s.size() - kStoreSuffix.size());
}

}  // namespace ptwm
