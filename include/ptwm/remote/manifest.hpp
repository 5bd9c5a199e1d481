// The manifest `pack` writes at PREFIX/ptwmfs-manifest.json beside a packed
// tree in an object store: every directory, store, copied file and link with
// its kind, size, mode and link target, and each store's original size. A
// mount or unpack reads it instead of listing the bucket, so a plain HTTP
// server can serve the same tree.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace ptwm::remote {

inline constexpr const char* kManifestName = "ptwmfs-manifest.json";

struct ManifestEntry {
    enum class Kind { kDirectory, kStore, kFile, kLink };
    std::string path;            // relative, '/'-separated, as stored ("sub/model.safetensors.ptwm")
    Kind kind = Kind::kFile;
    uint64_t size = 0;           // bytes of the object (a store's stored size)
    uint64_t original_size = 0;  // a store: the original file's size
    uint32_t mode = 0644;        // permission bits
    std::string target;          // a link's target, as written
};

struct Manifest {
    std::vector<ManifestEntry> entries;  // parents before children

    std::string to_json() const;
    // Throws Error naming `what` and the problem (bad JSON, an unsafe path
    // such as "../x" or "/x", an unknown kind).
    static Manifest parse(std::span<const uint8_t> bytes, const std::string& what);
    // The manifest of a packed store directory on disk (stores are opened to
    // read their original size). Each entry's path is its own below `root`;
    // links are listed as they are, never followed. Throws Error naming the
    // file whose name or link target is not UTF-8, which JSON cannot hold.
    static Manifest of_directory(const std::filesystem::path& root);
};

const char* kind_name(ManifestEntry::Kind kind);

// Throws Error naming `path` when a manifest could not hold it, as
// of_directory would after packing: its name (the last element) or, for a
// link (`is_link`), the link's target is not valid UTF-8. Pack checks every
// path of its source with it, in the walk that checks the source's other
// names, before writing anything; the elements above `path` are checked as
// paths of their own in that walk.
void require_manifest_name(const std::filesystem::path& path, bool is_link);

}  // namespace ptwm::remote
