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

// Throws Error naming the first path below `src` (or `src` itself, a file)
// whose name or link target a manifest cannot hold, as of_directory would
// after packing: pack checks its source with it before writing anything.
void require_manifest_names(const std::filesystem::path& src);

}  // namespace ptwm::remote
