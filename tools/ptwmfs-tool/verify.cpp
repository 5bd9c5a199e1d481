// ptwmfs-tool verify: decode everything, check every checksum, and
// optionally compare with the originals byte for byte.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <vector>

#include "command.hpp"
#include "progress.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/base/file_io.hpp"
#include "ptwm/store/store_decoder.hpp"
#include "store_names.hpp"
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
    "ORIGINAL byte for byte. Exit status 0: all good; 1: damage or a difference.\n"
    "\n"
    "options:\n"
    "  -j, --threads N        decoder threads, 1-1024 (default or 0: all cores)\n"
    "      --against ORIGINAL the original file or directory\n"
    "\n"
    "SRC may be a URL: s3://BUCKET/PREFIX or https://HOST/PATH/ (a tree packed there,\n"
    "read through its manifest), or .../NAME.ptwm (one store).\n";

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
            std::printf("DAMAGED %s\n", message.c_str());
        };
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
            return fail(e.what());
        }
        if (damaged)
            return fail(store_path.string() + ": " + std::to_string(damaged) + " of " + std::to_string(store->chunk_count()) +
                        " chunks damaged");
        if (first_difference)
            return fail(store_path.string() + ": differs from " + original->string() + " at byte " +
                        std::to_string(*first_difference));
        std::printf("OK %s (%zu chunks%s)\n", store_path.c_str(), store->chunk_count(),
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
                if (std::memcmp(x.data(), y.data(), n) != 0)
                    return fail(copy.string() + ": differs from " + original.string() + " near byte " + std::to_string(at));
            }
        } catch (const Error& e) {
            return fail(e.what());
        }
        return true;
    }

    bool fail(const std::string& message) {
        std::printf("FAILED %s\n", message.c_str());
        ++failures_;
        return false;
    }
    size_t failures() const { return failures_; }

private:
    unsigned threads_;
    size_t failures_ = 0;
};

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

    Verifier v(threads);
    if (is_url(src.string()) && url_names_store(src.string())) {
        v.verify_store(src, against, [&] { return open_store(src.string(), remote); });
    } else if (is_url(src.string())) {
        const RemoteTree tree = open_remote_tree(src.string(), remote);
        std::set<fs::path> seen;
        size_t stores = 0;
        using Kind = remote::ManifestEntry::Kind;
        for (const auto& e : tree.manifest.entries) {
            const std::string name = tree.store->object(e.path).text;
            if (e.kind == Kind::kStore) {
                ++stores;
                seen.insert(original_name(e.path));
                v.verify_store(name, against ? std::optional(*against / original_name(e.path)) : std::nullopt,
                               [&] { return tree.open_store(e.path); });
            } else if (e.kind == Kind::kFile && against) {
                seen.insert(e.path);
                try {
                    v.compare_bytes(name, tree.get(e.path), *against / e.path);
                } catch (const Error& err) {
                    v.fail(err.what());
                }
            }
        }
        if (against)
            for (const auto& file : regular_files(*against))
                if (!seen.count(fs::relative(file, *against)))
                    v.fail(file.string() + ": has no counterpart in " + src.string());
        if (stores == 0 && !against) v.fail(src.string() + ": holds no store");
    } else if (fs::is_directory(src)) {
        std::set<fs::path> seen;  // originals accounted for, relative to `against`
        size_t stores = 0;
        for (const auto& file : regular_files(src)) {
            const fs::path rel = fs::relative(file, src);
            if (is_store_name(file)) {
                ++stores;
                seen.insert(original_name(rel));
                v.verify_store(file, against ? std::optional(*against / original_name(rel)) : std::nullopt);
            } else if (against) {
                seen.insert(rel);
                v.compare_plain(file, *against / rel);
            }
        }
        if (against)
            for (const auto& file : regular_files(*against))
                if (!seen.count(fs::relative(file, *against)))
                    v.fail(file.string() + ": has no counterpart in " + src.string());
        if (stores == 0 && !against) v.fail(src.string() + ": holds no store");
    } else {
        v.verify_store(src, against);
    }
    if (v.failures()) {
        std::printf("verify: %zu problem(s) found\n", v.failures());
        return kFailed;
    }
    return kOk;
}

}  // namespace ptwm::tool
