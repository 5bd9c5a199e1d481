#include "ptwm/remote/manifest.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <nlohmann/json.hpp>

#include "ptwm/base/error.hpp"
#include "ptwm/base/utf8.hpp"
#include "ptwm/store/store_names.hpp"
#include "ptwm/store/store_reader.hpp"

namespace ptwm::remote {
namespace {

namespace fs = std::filesystem;
using Kind = ManifestEntry::Kind;
constexpr const char* kFormat = "ptwmfs-manifest";
constexpr int kVersion = 1;

bool safe_relative(const std::string& p) {
    if (p.empty() || p.front() == '/' || p.back() == '/') return false;
    size_t at = 0;
    while (at <= p.size()) {
        const auto slash = std::min(p.find('/', at), p.size());
        const std::string seg = p.substr(at, slash - at);
        if (seg.empty() || seg == "." || seg == "..") return false;
        at = slash + 1;
    }
    return p.find('\0') == std::string::npos;
}

// Every path below root/dir, relative to root, built from the names the
// directories hold. Nothing is resolved or followed: a link's path is its
// own wherever it points (fs::relative would resolve it to its target's),
// and a link to a directory is listed, not entered.
void list_below(const fs::path& root, const fs::path& dir, std::vector<fs::path>& out) {
    for (const auto& entry : fs::directory_iterator(root / dir)) {
        const fs::path rel = dir / entry.path().filename();
        out.push_back(rel);
        if (entry.symlink_status().type() == fs::file_type::directory) list_below(root, rel, out);
    }
}

std::vector<fs::path> relative_paths(const fs::path& root) {
    std::vector<fs::path> paths;
    list_below(root, {}, paths);
    std::sort(paths.begin(), paths.end());  // parents sort before their children
    return paths;
}

// The manifest is JSON, which holds UTF-8 text only, while a file name or a
// link target is any bytes: say which file (`shown`), before a JSON writer
// fails with a message that names none.
void require_utf8(const fs::path& shown, const std::string& name, const std::string& link_target) {
    if (!is_utf8(name))
        throw Error(printable(shown.string()) +
                    ": the name is not valid UTF-8, and a ptwmfs manifest (JSON) holds UTF-8 names only; rename it");
    if (!is_utf8(link_target))
        throw Error(printable(shown.string()) + ": link target '" + printable(link_target) +
                    "' is not valid UTF-8, and a ptwmfs manifest (JSON) holds UTF-8 text only");
}

}  // namespace

const char* kind_name(Kind kind) {
    switch (kind) {
    case Kind::kDirectory: return "dir";
    case Kind::kStore: return "store";
    case Kind::kFile: return "file";
    case Kind::kLink: return "link";
    }
    return "?";
}

std::string Manifest::to_json() const {
    nlohmann::ordered_json entries_json = nlohmann::ordered_json::array();
    for (const auto& e : entries) {
        nlohmann::ordered_json j;
        j["path"] = e.path;
        j["kind"] = kind_name(e.kind);
        if (e.kind == Kind::kLink) {
            j["target"] = e.target;
        } else {
            j["mode"] = e.mode;
            if (e.kind != Kind::kDirectory) j["size"] = e.size;
            if (e.kind == Kind::kStore) j["original_size"] = e.original_size;
        }
        entries_json.push_back(std::move(j));
    }
    nlohmann::ordered_json doc;
    doc["format"] = kFormat;
    doc["version"] = kVersion;
    doc["entries"] = std::move(entries_json);
    return doc.dump(1) + "\n";
}

namespace {

// The longest '/'-separated name of a path, in bytes.
size_t longest_name(std::string_view path) {
    size_t longest = 0;
    for (size_t at = 0; at <= path.size();) {
        const size_t slash = std::min(path.find('/', at), path.size());
        longest = std::max(longest, slash - at);
        at = slash + 1;
    }
    return longest;
}

// A size field: a whole number a file's size (off_t) can hold.
uint64_t file_size(const nlohmann::json& entry, const char* field, const std::string& path, const std::string& what) {
    const nlohmann::json& v = entry.at(field);
    if (!v.is_number_unsigned() || v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw Error(what + ": '" + path + "': " + field + " " + v.dump() + " is not a size a file can have");
    return v.get<uint64_t>();
}

// Each path once, and nothing below a path that is not a directory: a
// manifest that lists "w" as a link to /etc and then "w" (or "w/x") as a
// file would have unpack write through the link, outside its destination.
void refuse_overlaps(const Manifest& m, const std::string& what) {
    std::unordered_map<std::string_view, ManifestEntry::Kind> kinds;
    for (const ManifestEntry& e : m.entries)
        if (!kinds.emplace(e.path, e.kind).second) throw Error(what + ": '" + e.path + "' is listed twice in the manifest");
    for (const ManifestEntry& e : m.entries)
        for (auto slash = e.path.find('/'); slash != std::string::npos; slash = e.path.find('/', slash + 1)) {
            const auto parent = kinds.find(std::string_view(e.path).substr(0, slash));
            if (parent != kinds.end() && parent->second != ManifestEntry::Kind::kDirectory)
                throw Error(what + ": '" + e.path + "' lies below '" + std::string(parent->first) +
                            "', which the manifest does not list as a directory");
        }
}

}  // namespace

Manifest Manifest::parse(std::span<const uint8_t> bytes, const std::string& what) {
    nlohmann::json doc;
    try {
        doc = nlohmann::json::parse(bytes.begin(), bytes.end());
    } catch (const nlohmann::json::exception& e) {
        throw Error(what + ": not a ptwmfs manifest: " + e.what());
    }
    Manifest m;
    try {
        if (!doc.is_object() || doc.value("format", "") != kFormat)
            throw Error(what + ": not a ptwmfs manifest (no \"format\": \"" + kFormat + "\")");
        if (doc.at("version").get<int>() != kVersion)
            throw Error(what + ": manifest version " + doc.at("version").dump() + ", this ptwmfs reads version " +
                        std::to_string(kVersion));
        for (const auto& j : doc.at("entries")) {
            ManifestEntry e;
            e.path = j.at("path").get<std::string>();
            if (!safe_relative(e.path)) throw Error(what + ": unsafe path in the manifest: '" + e.path + "'");
            if (longest_name(e.path) > NAME_MAX)
                throw Error(what + ": '" + e.path + "' holds a name of more than " + std::to_string(NAME_MAX) + " bytes");
            const std::string kind = j.at("kind").get<std::string>();
            if (kind == "dir") e.kind = Kind::kDirectory;
            else if (kind == "store") e.kind = Kind::kStore;
            else if (kind == "file") e.kind = Kind::kFile;
            else if (kind == "link") e.kind = Kind::kLink;
            else throw Error(what + ": '" + e.path + "': unknown kind '" + kind + "'");
            // What no file system holds is refused here, naming the entry,
            // not found later as a stat or readlink that fails with EIO.
            if (e.kind == Kind::kLink) {
                e.target = j.at("target").get<std::string>();
                if (e.target.empty() || e.target.size() >= PATH_MAX || e.target.find('\0') != std::string::npos)
                    throw Error(what + ": '" + e.path + "': a link target must be 1 to " + std::to_string(PATH_MAX - 1) +
                                " bytes, with no NUL");
            } else {
                e.mode = j.at("mode").get<uint32_t>() & 07777;
                if (e.kind != Kind::kDirectory) e.size = file_size(j, "size", e.path, what);
                if (e.kind == Kind::kStore) e.original_size = file_size(j, "original_size", e.path, what);
            }
            m.entries.push_back(std::move(e));
        }
    } catch (const nlohmann::json::exception& e) {
        throw Error(what + ": malformed manifest: " + e.what());
    }
    refuse_overlaps(m, what);
    return m;
}

Manifest Manifest::of_directory(const fs::path& root) {
    Manifest m;
    for (const auto& rel : relative_paths(root)) {
        const fs::path p = root / rel;
        ManifestEntry e;
        e.path = rel.generic_string();
        if (e.path == kManifestName) continue;  // a manifest written before does not list itself
        struct stat st{};
        if (::lstat(p.c_str(), &st) != 0) throw Error(printable(p.string()) + ": cannot stat");
        e.mode = st.st_mode & 07777;
        if (S_ISLNK(st.st_mode)) {
            e.kind = Kind::kLink;
            e.target = fs::read_symlink(p).string();
        } else if (S_ISDIR(st.st_mode)) {
            e.kind = Kind::kDirectory;
        } else if (S_ISREG(st.st_mode)) {
            e.size = static_cast<uint64_t>(st.st_size);
            if (is_store_name(p)) {
                e.kind = Kind::kStore;
                e.original_size = StoreReader::open(p.string())->original_size();
            }
        } else {
            continue;  // sockets, devices: pack never makes them
        }
        require_utf8(p, e.path, e.target);
        m.entries.push_back(std::move(e));
    }
    return m;
}

void require_manifest_name(const fs::path& path, bool is_link) {
    require_utf8(path, path.filename().string(), is_link ? fs::read_symlink(path).string() : "");
}

}  // namespace ptwm::remote
