// ptwmfs-tool verify: decode everything, check every checksum, and
// optionally compare with the originals byte for byte.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "command.hpp"
#include "progress.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/base/utf8.hpp"
#include "ptwm/base/file_io.hpp"
#include "ptwm/store/store_decoder.hpp"
#include "ptwm/store/store_names.hpp"
#include "store_open.hpp"
#include "tree.hpp"

namespace ptwm::tool {
namespace {

constexpr const char* kHelp =
    "usage: ptwmfs-tool verify [OPTIONS] SRC [--against ORIGINAL]\n"
    "\n"
    "Decode every chunk of the store SRC (or of every store below the directory SRC)\n"
    "and check every checksum, listing each damaged chunk. With --against, also\n"
    "compare the decoded bytes (and, for a directory, every other file) with\n"
    "ORIGINAL byte for byte, and every symlink's target with the original link's.\n"
    "A manifest 'pack --manifest' wrote must list the tree as it is.\n"
    "Exit status 0: all good; 1: damage or a difference.\n"
    "\n"
    "options:\n"
    "  -j, --threads N        decoder threads, 1-1024 (default or 0: all cores)\n"
    "      --against ORIGINAL the original file or directory\n"
    "\n"
    "SRC may be a URL: s3://BUCKET/PREFIX or https://HOST/PATH/ (a tree packed there,\n"
    "read through its manifest), or .../NAME.ptwm (one store).\n";

// A manifest entry in words, as a FAILED line shows it.
std::string describe(const remote::ManifestEntry& e) {
    using Kind = remote::ManifestEntry::Kind;
    std::string text = remote::kind_name(e.kind);
    if (e.kind == Kind::kLink) return text + " to '" + e.target + "'";
    char mode[16];
    std::snprintf(mode, sizeof mode, " mode %04o", e.mode);
    text += mode;
    if (e.kind != Kind::kDirectory) text += ", " + std::to_string(e.size) + " bytes";
    if (e.kind == Kind::kStore) text += ", original " + std::to_string(e.original_size) + " bytes";
    return text;
}

// The first path on which a manifest and the tree it came from disagree, in
// words; nullopt when it lists the tree exactly.
std::optional<std::string> first_difference(const remote::Manifest& listed, const remote::Manifest& actual) {
    std::map<std::string, std::string> in_manifest, in_tree;
    for (const auto& e : listed.entries) in_manifest[e.path] = describe(e);
    for (const auto& e : actual.entries) in_tree[e.path] = describe(e);
    auto m = in_manifest.begin();
    auto t = in_tree.begin();
    while (m != in_manifest.end() || t != in_tree.end()) {
        if (t == in_tree.end() || (m != in_manifest.end() && m->first < t->first))
            return "lists '" + m->first + "' (" + m->second + "), which the tree does not have";
        if (m == in_manifest.end() || t->first < m->first)
            return "does not list '" + t->first + "' (" + t->second + ")";
        if (m->second != t->second) return "lists '" + m->first + "' as " + m->second + ", the tree has " + t->second;
        ++m;
        ++t;
    }
    return std::nullopt;
}

class Verifier {
public:
    explicit Verifier(unsigned threads) : threads_(threads) {}

    // Returns whether the store decoded cleanly (and matched `original`).
    bool verify_store(const fs::path& store_path, const std::optional<fs::path>& original,
                      const std::function<std::unique_ptr<StoreReader>()>& open = {}) {
        std::unique_ptr<StoreReader> store;
        try {
            store = open ? open() : StoreReader::open(store_path);
        } catch (const Error& e) {
            return fail(e.what());
        }
        std::optional<File> orig;
        if (original) {
            try {
                orig.emplace(File::open_read(*original));
            } catch (const Error& e) {
                return fail(e.what());
            }
            if (orig->size() != store->original_size())
                return fail(store_path.string() + ": holds " + std::to_string(store->original_size()) + " bytes, " +
                            original->string() + " has " + std::to_string(orig->size()));
        }
        size_t damaged = 0;
        std::optional<uint64_t> first_difference;
        DecodeAllOptions opt;
        opt.threads = threads_;
        opt.on_damaged = [&](size_t, const std::string& message) {
            ++damaged;
            std::printf("DAMAGED %s\n", printable(message).c_str());
        };
        opt.progress = [&](uint64_t done, uint64_t total) { progress_.update(store_path.filename().string(), done, total); };
        std::vector<uint8_t> expected;
        try {
            decode_all(*store, opt, [&](uint64_t offset, std::span<const uint8_t> bytes) {
                if (!orig || first_difference) return;
                expected.resize(bytes.size());
                orig->read_exact(offset, expected);
                const auto mismatch = std::mismatch(bytes.begin(), bytes.end(), expected.begin());
                if (mismatch.first != bytes.end())
                    first_difference = offset + static_cast<uint64_t>(mismatch.first - bytes.begin());
            });
        } catch (const Error& e) {
            progress_.finish();
            return fail(e.what());
        }
        progress_.finish();
        if (damaged)
            return fail(store_path.string() + ": " + std::to_string(damaged) + " of " + std::to_string(store->chunk_count()) +
                        " chunks damaged");
        if (first_difference)
            return fail(store_path.string() + ": differs from " + original->string() + " at byte " +
                        std::to_string(*first_difference));
        std::printf("OK %s (%zu chunks%s)\n", printable(store_path.string()).c_str(), store->chunk_count(),
                    original ? ", identical to the original" : "");
        return true;
    }

    // A copied file fetched from a URL against the original.
    bool compare_bytes(const std::string& name, const std::vector<uint8_t>& bytes, const fs::path& original) {
        try {
            const File b = File::open_read(original);
            if (b.size() != bytes.size()) return fail(name + ": size differs from " + original.string());
            std::vector<uint8_t> y(bytes.size());
            b.read_exact(0, y);
            const auto m = std::mismatch(bytes.begin(), bytes.end(), y.begin());
            if (m.first != bytes.end())
                return fail(name + ": differs from " + original.string() + " at byte " +
                            std::to_string(m.first - bytes.begin()));
        } catch (const Error& e) {
            return fail(e.what());
        }
        return true;
    }

    bool compare_plain(const fs::path& copy, const fs::path& original) {
        try {
            const File a = File::open_read(copy), b = File::open_read(original);
            if (a.size() != b.size()) return fail(copy.string() + ": size differs from " + original.string());
            std::vector<uint8_t> x(1u << 20), y(1u << 20);
            for (uint64_t at = 0; at < a.size(); at += x.size()) {
                const auto n = static_cast<size_t>(std::min<uint64_t>(x.size(), a.size() - at));
                a.read_exact(at, {x.data(), n});
                b.read_exact(at, {y.data(), n});
                const auto m = std::mismatch(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n), y.begin());
                if (m.first != x.begin() + static_cast<std::ptrdiff_t>(n))
                    return fail(copy.string() + ": differs from " + original.string() + " at byte " +
                                std::to_string(at + static_cast<uint64_t>(m.first - x.begin())));
            }
        } catch (const Error& e) {
            return fail(e.what());
        }
        return true;
    }

    // A symlink against its original: pack keeps a link as the link it is,
    // with the same target text, so nothing is followed or resolved.
    bool compare_link(const std::string& name, const fs::path& target, const fs::path& original) {
        std::error_code ec;
        const auto status = fs::symlink_status(original, ec);
        const std::string link = name + ": a symlink to '" + target.string() + "', but " + original.string();
        if (!fs::exists(status)) return fail(link + " does not exist");
        if (!fs::is_symlink(status)) return fail(link + " is not a symlink");
        const fs::path original_target = fs::read_symlink(original, ec);
        if (ec) return fail(original.string() + ": cannot read the link: " + ec.message());
        if (original_target != target)
            return fail(name + ": links to '" + target.string() + "', " + original.string() + " to '" +
                        original_target.string() + "'");
        return true;
    }

    // `pack --manifest` leaves its own manifest in the tree: no original has
    // one to compare with, but an HTTP server hands it to every reader, so it
    // must still list the tree as it is.
    bool check_manifest(const fs::path& tree) {
        const fs::path path = tree / remote::kManifestName;
        try {
            const auto listed = remote::Manifest::parse(read_whole_file(path), path.string());
            if (const auto difference = first_difference(listed, remote::Manifest::of_directory(tree)))
                return fail(path.string() + ": " + *difference);
            std::printf("OK %s (%zu entries, as in the tree)\n", printable(path.string()).c_str(), listed.entries.size());
        } catch (const Error& e) {
            return fail(e.what());
        }
        return true;
    }

    bool fail(const std::string& message) {
        std::printf("FAILED %s\n", printable(message).c_str());
        ++failures_;
        return false;
    }
    size_t failures() const { return failures_; }

private:
    unsigned threads_;
    size_t failures_ = 0;
    Progress progress_;  // a bar on stderr while a store decodes (a terminal only)
};

// The originals below ORIGINAL that the entries of a packed tree stand for,
// so that those none stands for can be named at the end.
class Counterparts {
public:
    explicit Counterparts(std::optional<fs::path> root) : root_(std::move(root)) {}

    // ORIGINAL/relative, now accounted for; nullopt without --against.
    std::optional<fs::path> claim(const fs::path& relative) {
        if (!root_) return std::nullopt;
        claimed_.insert(relative);
        return *root_ / relative;
    }

    // The same for a packed file or store: its original, or nullopt. An
    // original that is a symlink is a difference in itself (pack would have
    // kept the link, and comparing through it would hide that), unless it
    // leads to a file outside ORIGINAL, whose bytes pack took in its place.
    std::optional<fs::path> claim_file(Verifier& v, const std::string& name, const fs::path& relative) {
        const auto original = claim(relative);
        std::error_code ec;
        if (original && fs::is_symlink(fs::symlink_status(*original, ec)) && !links_to_a_file_outside(*root_, *original)) {
            v.fail(original->string() + ": a symlink, but " + name + " is not");
            return std::nullopt;
        }
        return original;
    }

    void report_unclaimed(Verifier& v, const std::string& src) const {
        if (!root_) return;
        // Lexically: fs::relative() would resolve a link to its target's path.
        for (const auto& original : files_and_links(*root_))
            if (!claimed_.count(original.lexically_relative(*root_)))
                v.fail(original.string() + ": has no counterpart in " + src);
    }

private:
    std::optional<fs::path> root_;
    std::set<fs::path> claimed_;
};

// A tree is compared with a directory of originals: a wrong ORIGINAL is one
// error, not one per entry. `src_is` says what SRC is ("DIR is a directory").
void require_directory(const fs::path& against, const std::string& src_is) {
    std::error_code ec;
    const auto status = fs::status(against, ec);
    if (!fs::exists(status)) throw Error("--against " + against.string() + ": no such file or directory");
    if (!fs::is_directory(status))
        throw Error("--against " + against.string() + ": " +
                    (fs::is_regular_file(status) ? "is a file, " : "is not a directory, ") + src_is);
}

// Every entry of the tree packed at `url`, as its manifest lists them; returns how many stores.
size_t verify_remote_tree(Verifier& v, Counterparts& originals, const std::string& url, const RemoteOptions& remote) {
    const RemoteTree tree = open_remote_tree(url, remote);
    size_t stores = 0;
    using Kind = remote::ManifestEntry::Kind;
    for (const auto& e : tree.manifest.entries) {
        const std::string name = tree.store->object(e.path).text;
        if (e.kind == Kind::kStore) {
            ++stores;
            v.verify_store(name, originals.claim_file(v, name, original_name(e.path)),
                           [&] { return tree.open_store(e.path); });
        } else if (e.kind == Kind::kLink) {
            if (const auto original = originals.claim(e.path)) v.compare_link(name, e.target, *original);
        } else if (e.kind == Kind::kFile) {
            if (const auto original = originals.claim_file(v, name, e.path)) {
                try {
                    v.compare_bytes(name, tree.get(e.path, e.size), *original);
                } catch (const Error& err) {
                    v.fail(err.what());
                }
            }
        }
    }
    try {
        tree.require_unchanged();  // else the checks above may have read two trees
    } catch (const Error& err) {
        v.fail(err.what());
    }
    return stores;
}

// Every file and link below the directory `dir`; returns how many stores.
size_t verify_local_tree(Verifier& v, Counterparts& originals, const fs::path& dir) {
    size_t stores = 0;
    for (const auto& entry : files_and_links(dir)) {
        const fs::path rel = entry.lexically_relative(dir);
        if (rel == remote::kManifestName) {
            v.check_manifest(dir);
        } else if (fs::is_symlink(entry)) {
            if (const auto original = originals.claim(rel))
                v.compare_link(entry, fs::read_symlink(entry), *original);
        } else if (is_store_name(entry)) {
            ++stores;
            v.verify_store(entry, originals.claim_file(v, entry, original_name(rel)));
        } else if (const auto original = originals.claim_file(v, entry, rel)) {
            v.compare_plain(entry, *original);
        }
    }
    return stores;
}

}  // namespace

int verify_main(Args& args) {
    if (printed_help(args, kHelp)) return kOk;
    std::string value;
    unsigned threads = 0;
    if (args.option("threads", "j", value)) threads = parse_threads(value);
    std::optional<fs::path> against;
    if (args.option("against", "", value)) against = value;
    const RemoteOptions remote = remote_options(args);
    const fs::path src = args.positionals(1, 1)[0];
    refuse_unused(remote, {src.string()});
    // One store's ORIGINAL may be the directory holding it (as unpack's
    // DST may be): DIR/NAME is compared, not DIR.
    const auto original_of = [&](const std::string& store_name) {
        std::error_code ec;
        if (against && fs::is_directory(*against, ec)) return std::optional<fs::path>(*against / original_name(store_name));
        return against;
    };

    Verifier v(threads);
    if (is_url(src.string()) && url_names_store(src.string())) {
        const std::string leaf = src.string().substr(src.string().rfind('/') + 1);
        v.verify_store(src, original_of(leaf), [&] { return open_store(src.string(), remote); });
    } else if (is_url(src.string()) || fs::is_directory(src)) {
        const bool remote_tree = is_url(src.string());
        if (against)
            require_directory(*against, src.string() + (remote_tree ? " is a packed tree" : " is a directory"));
        Counterparts originals(against);
        const size_t stores = remote_tree ? verify_remote_tree(v, originals, src.string(), remote)
                                          : verify_local_tree(v, originals, src);
        originals.report_unclaimed(v, src.string());
        if (stores == 0 && !against) v.fail(src.string() + ": holds no store");
    } else {
        v.verify_store(local_store_path(src.string()), original_of(src.filename().string()));
    }
    if (v.failures()) {
        std::printf("verify: %zu problem(s) found\n", v.failures());
        return kFailed;
    }
    return kOk;
}

}  // namespace ptwm::tool
