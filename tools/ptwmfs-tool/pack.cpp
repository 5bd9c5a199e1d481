// ptwmfs-tool pack: safetensors file or model directory -> stores.
#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "command.hpp"
#include "progress.hpp"
#include "ptwm/base/cancellation.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/base/file_io.hpp"
#include "ptwm/base/utf8.hpp"
#include "ptwm/base/size_text.hpp"
#include "ptwm/remote/manifest.hpp"
#include "ptwm/store/safetensors.hpp"
#include "ptwm/store/store_format.hpp"
#include "ptwm/store/store_names.hpp"
#include "ptwm/store/store_writer.hpp"
#include "remote_upload.hpp"
#include "store_open.hpp"
#include "tree.hpp"

namespace ptwm::tool {
namespace {

constexpr const char* kHelp =
    "usage: ptwmfs-tool pack [OPTIONS] SRC DST\n"
    "\n"
    "Compress SRC, a .safetensors file or a model directory, losslessly. A file\n"
    "becomes the store DST (or DST/NAME.ptwm when DST is a directory). A directory\n"
    "is mirrored into DST: every safetensors file (found by content, not by name)\n"
    "becomes NAME.ptwm, every other file is copied unchanged, symlinks stay links\n"
    "(but for links to files outside SRC, as a Hugging Face snapshot's into its\n"
    "blobs: their files are packed or copied in their place).\n"
    "Every output is written to a temporary file and renamed into place; a new\n"
    "directory DST appears whole or not at all.\n"
    "\n"
    "options:\n"
    "  -j, --threads N     encoder threads, 1-1024 (default or 0: all cores; one more reads and writes)\n"
    "  -l, --level N       1 (fastest) .. 9 (smallest); default 3\n"
    "      --chunk-size S  bytes per chunk, 4K to 256M, with K/M/G suffixes (default 256K)\n"
    "      --on-bad MODE   a safetensors file that fails to parse: 'fail' (default)\n"
    "                      stops with an error, 'copy' copies it unchanged with a warning\n"
    "  -q, --quiet         print no summary\n"
    "      --parallel N    parts in flight to s3:// across the tree, each in memory, 1-256 (default 4)\n"
    "      --part-size S   multipart part size for s3:// (default 16M, 5M-5G; more for a\n"
    "                      store that would take over 10,000 parts)\n"
    "      --manifest      also write DST/ptwmfs-manifest.json, so that any HTTP(S)\n"
    "                      server can serve DST to 'ptwmfs https://HOST/PATH/'\n"
    "\n"
    "DST may be s3://BUCKET/PREFIX: the tree is packed in $TMPDIR, then every store,\n"
    "file and link goes to PREFIX/... (multipart for large stores, N parts in flight\n"
    "in all) and the manifest PREFIX/ptwmfs-manifest.json is written last, so a\n"
    "tree whose manifest is there is whole. s3://BUCKET/KEY.ptwm takes one store.\n";

// --parallel: parts in flight, each in memory (256 x the largest part,
// 5 GiB, would be more than any machine has).
constexpr uint64_t kMaxParallel = 256;

struct Totals {
    uint64_t original = 0, stored = 0, files_packed = 0, files_copied = 0;
    uint64_t links_followed = 0;  // links out of SRC whose files were packed or copied
};

// Whether `path` starts as a store does: one given to pack again would
// otherwise be refused for a safetensors header length of 10^18 bytes.
bool is_store_file(const fs::path& path) {
    std::array<uint8_t, kStoreMagic.size()> start{};
    try {
        const File f = File::open_read(path.string());
        return f.read_up_to(0, start) == start.size() && start == kStoreMagic;
    } catch (const Error&) {
        return false;  // read_safetensors_header says what is wrong
    }
}

bool has_suffix(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// `path`'s safetensors header, or none and what is wrong with it in
// `error`. The header parsed to tell a bad file is the one packed (a
// directory's are parsed once more before the walk, by
// refuse_unreadable_sources).
std::optional<SafetensorsHeader> parsed_header(const fs::path& path, std::string& error) {
    try {
        return read_safetensors_header(path);
    } catch (const Error& e) {
        error = e.what();
        return std::nullopt;
    }
}

// A directory's bad safetensors file, said with the way round it.
Error bad_file_in_directory(const std::string& what) {
    return Error(what + " (--on-bad copy copies such files unchanged)");
}

// Whether a directory's file is packed as safetensors (by its content or
// its name), rather than copied. Not a Hugging Face partial download
// (blobs/ETAG.incomplete, a file being fetched or whose fetch broke off):
// it is no whole file yet, huggingface_hub resumes it where it is, and as
// a cut-short safetensors file it failed the pack of the whole cache.
bool packs_as_safetensors(const fs::path& path) {
    if (has_suffix(path.string(), ".incomplete")) return false;
    return looks_like_safetensors(path) || has_suffix(path.string(), ".safetensors");
}

// The names the packed tree could not keep, found in one walk of the
// source before anything is written:
// - in a directory, a source file named NAME.ptwm would be taken for a
//   store in the packed tree (by unpack and the mount), or be overwritten
//   by NAME's store;
// - with `manifest`, a name or link target that is not UTF-8, which the
//   manifest (JSON) could not hold.
void refuse_unkeepable_names(const fs::path& src, bool manifest) {
    if (!fs::is_directory(src)) {
        if (manifest) remote::require_manifest_name(src, false);  // the store is a file of that name, not a link
        return;
    }
    // Sorted (parents before children): of several such names, the same
    // one is reported every time, whatever order the directories list them in.
    std::vector<std::pair<fs::path, bool>> entries;  // (path, is a link)
    for (auto it = fs::recursive_directory_iterator(src); it != fs::recursive_directory_iterator(); ++it) {
        throw_if_cancelled();
        entries.emplace_back(it->path(), it->is_symlink());
    }
    std::sort(entries.begin(), entries.end());
    for (const auto& [path, is_link] : entries) {
        // The packed tree's manifest takes that name at its root: the file
        // would be overwritten by it (an upload, --manifest) or left out
        // by unpack, silently.
        if (path == src / remote::kManifestName)
            throw Error(path.string() + ": " + remote::kManifestName +
                        " is the name of the manifest a packed tree keeps at its root; rename it or pack it apart");
        if (manifest) remote::require_manifest_name(path, is_link);
        if (!is_link && is_store_name(path))
            throw Error(path.string() + ": a source file named *" + std::string(kStoreSuffix) +
                        " would be taken for a store in the packed tree; rename it or pack it apart");
    }
}

// The files of a directory SRC that pack would fail on, found before
// anything is encoded: a file it cannot open (permissions), and, unless
// --on-bad copy, a safetensors file whose header does not parse (a shard
// cut short by an interrupted download). Found by the walk itself they
// failed the pack only when reached, after every file before them in
// order was packed: minutes to hours of a multi-gigabyte checkpoint's
// shards thrown away for a last shard that was refused in a millisecond.
// The files are those mirror_tree hands to the pack: regular files, and
// links to files outside SRC (LinksOut::followed).
void refuse_unreadable_sources(const fs::path& src, bool copy_bad) {
    std::vector<fs::path> files;
    for (auto it = fs::recursive_directory_iterator(src); it != fs::recursive_directory_iterator(); ++it) {
        throw_if_cancelled();
        if (it->is_symlink() ? links_to_a_file_outside(src, it->path()) : it->is_regular_file())
            files.push_back(it->path());
    }
    std::sort(files.begin(), files.end());  // the first in the walk's order is the one named
    for (const auto& path : files) {
        throw_if_cancelled();
        (void)File::open_read(path.string());  // (throws, naming the file and the reason)
        if (copy_bad || !packs_as_safetensors(path)) continue;
        std::string bad;
        if (!parsed_header(path, bad)) throw bad_file_in_directory(bad);
    }
}

}  // namespace

int pack_main(Args& args) {
    if (printed_help(args, kHelp)) return kOk;
    PackOptions opt;
    std::string value;
    if (args.option("threads", "j", value)) opt.threads = parse_threads(value);
    if (args.option("level", "l", value)) {
        opt.encode.level = static_cast<int>(parse_count(value, "--level"));
        if (opt.encode.level < 1 || opt.encode.level > 9) throw UsageError{"--level takes 1 to 9, not " + value};
    }
    if (args.option("chunk-size", "", value)) {
        const auto size = parse_size(value);
        if (!size || *size < 4096 || *size > kMaxChunkBytes)
            throw UsageError{"--chunk-size takes 4K to 256M, not '" + value + "'"};
        opt.chunk_bytes = static_cast<uint32_t>(*size);
    }
    bool copy_bad = false;
    if (args.option("on-bad", "", value)) {
        if (value != "fail" && value != "copy") throw UsageError{"--on-bad takes 'fail' or 'copy'"};
        copy_bad = value == "copy";
    }
    const bool quiet = args.flag("quiet", "q");
    std::string upload_option;  // the first of --parallel and --part-size given (they shape an upload)
    unsigned parallel = 4;
    if (args.option("parallel", "", value)) {
        upload_option = "--parallel";
        const uint64_t n = parse_count(value, "--parallel");
        if (n < 1 || n > kMaxParallel) throw UsageError{"--parallel takes 1 to " + std::to_string(kMaxParallel) + ", not " + value};
        parallel = static_cast<unsigned>(n);
    }
    const bool write_manifest = args.flag("manifest");
    uint64_t part_bytes = 16ull << 20;
    if (args.option("part-size", "", value)) {
        if (upload_option.empty()) upload_option = "--part-size";
        const auto size = parse_size(value);
        if (!size || *size < (5ull << 20) || *size > (5ull << 30))
            throw UsageError{"--part-size takes 5M to 5G, not '" + value + "'"};
        part_bytes = *size;
    }
    const RemoteOptions remote = remote_options(args);
    const auto pos = args.positionals(2, 2);
    refuse_unused(remote, pos);
    if (!upload_option.empty() && !is_url(pos[1]))
        throw UsageError{upload_option + " is for an s3:// DST, and " + pos[1] + " is local"};
    const fs::path src = pos[0];
    fs::path dst = pos[1];
    std::error_code ec;
    // First, as nothing else about a source that is not there is worth
    // saying (not that its name would not fit in a manifest).
    if (!fs::exists(src, ec)) throw Error(src.string() + ": no such file or directory");
    // Before anything is written: a file packed into DST that is no
    // directory left its store there and then failed for the manifest.
    if (write_manifest && !is_url(pos[1]) && !fs::is_directory(src, ec) && !fs::is_directory(dst, ec))
        throw Error(dst.string() + ": --manifest writes DST/" + remote::kManifestName +
                    ", so DST must be a directory (one that exists, for a single file)");
    // A directory's DST, before its names are judged: `pack model
    // model/packed` run twice must say that DST is inside SRC, not that
    // the first run's stores are source files named *.ptwm. (An upload's
    // DST, its local temporary, is checked where it is made.)
    const auto require_directory_dst = [&] {
        if (fs::exists(dst, ec) && !fs::is_directory(dst)) throw Error(dst.string() + ": exists and is not a directory");
        require_outside(src, dst);
    };
    if (!is_url(pos[1]) && fs::is_directory(src, ec)) require_directory_dst();
    // A tree uploaded to a prefix gets a manifest too.
    refuse_unkeepable_names(src, is_url(pos[1]) ? !url_names_store(pos[1]) : write_manifest);
    if (fs::is_directory(src, ec)) refuse_unreadable_sources(src, copy_bad);
    std::optional<RemoteUpload> upload;
    if (is_url(pos[1])) {
        upload.emplace(pos[1], remote, parallel, part_bytes, quiet);
        dst = upload->local_target(src);
    }

    Progress progress;
    Totals totals;
    const auto start = std::chrono::steady_clock::now();
    // A store or copy synced on its own, unless its tree is synced whole
    // (staged) or is a temporary one for the upload.
    Durability durability = upload ? Durability::kByCaller : Durability::kFsync;
    auto pack_one = [&](const fs::path& in, const SafetensorsHeader& header, const fs::path& out) {
        require_other_file(in, out);  // (a destination may link back into the source)
        // Said of the source: the store's name would otherwise come up in an
        // error about a temporary path.
        if (const std::string name = out.filename().string(); name.size() > NAME_MAX)
            throw Error(in.string() + ": its store's name would be " + std::to_string(name.size()) +
                        " bytes, more than a file name may have (" + std::to_string(NAME_MAX) + "): rename it");
        remove_abandoned_temporaries(out);
        PackOptions o = opt;
        o.durability = durability;
        const std::string label = in.filename().string();
        o.progress = [&](uint64_t done, uint64_t total) { progress.update(label, done, total); };
        const PackResult r = pack_file(in, header, out, o);
        progress.finish();
        totals.original += r.original_bytes;
        totals.stored += r.stored_bytes;
        ++totals.files_packed;
        if (!quiet)
            std::printf("%s: %s -> %s (%.4f)\n", printable(in.string()).c_str(), human_bytes(r.original_bytes).c_str(),
                        human_bytes(r.stored_bytes).c_str(),
                        r.original_bytes ? static_cast<double>(r.stored_bytes) / static_cast<double>(r.original_bytes) : 1.0);
    };

    // A new directory DST appears whole or not at all (an upload's is
    // already a temporary one).
    std::optional<StagedDirectory> staged;
    if (fs::is_directory(src)) {
        if (upload) {
            require_directory_dst();
        } else {
            dst = staged.emplace(dst).path();
            durability = staged->durability();
        }
        mirror_tree(src, dst, [&](const fs::path& in, const fs::path& out) {
            if (fs::is_symlink(in)) ++totals.links_followed;
            if (packs_as_safetensors(in)) {
                // Only a header that does not parse is a bad file --on-bad
                // copy takes; a store that cannot be written (a full disk)
                // fails the pack either way.
                std::string bad;
                if (const auto header = parsed_header(in, bad)) {
                    pack_one(in, *header, out.string() + std::string(kStoreSuffix));
                    return;
                }
                if (!copy_bad) throw bad_file_in_directory(bad);
                std::fprintf(stderr, "ptwmfs-tool pack: warning: copying unchanged: %s\n", printable(bad).c_str());
            }
            copy_file_atomic(in, out, durability);
            ++totals.files_copied;
            // A store of an earlier pack under this name (the file was
            // safetensors then) would hide the copy: the mount and unpack
            // show NAME.ptwm over NAME, serving the old weights.
            const fs::path stale = out.string() + std::string(kStoreSuffix);
            std::error_code stale_ec;
            if (fs::is_regular_file(fs::symlink_status(stale, stale_ec)) && fs::remove(stale, stale_ec) && !quiet)
                std::fprintf(stderr, "ptwmfs-tool pack: removed %s: an earlier store of %s, no longer safetensors\n",
                             printable(stale.string()).c_str(), printable(in.string()).c_str());
        }, LinksOut::followed);
    } else {
        // (A FIFO would block the read until a writer came; a device has no end.)
        if (!fs::is_regular_file(src, ec))
            throw Error(src.string() + ": not a regular file or directory (pack reads a file by offsets, not as a stream)");
        if (fs::is_directory(dst)) dst /= src.filename().string() + std::string(kStoreSuffix);
        if (is_store_file(src))
            throw Error(src.string() + ": a ptwmfs store already ('ptwmfs-tool unpack' restores its original)");
        pack_one(src, read_safetensors_header(src), dst);
    }

    if (upload) upload->send();
    if (write_manifest && !upload) {
        if (!fs::is_directory(dst)) throw Error(dst.string() + ": --manifest needs a directory DST");
        const std::string json = remote::Manifest::of_directory(dst).to_json();
        AtomicOutput out((dst / remote::kManifestName).string(), 0666, durability);
        out.write_at(0, {reinterpret_cast<const uint8_t*>(json.data()), json.size()});
        out.commit();
    }
    if (staged) staged->commit();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // A tree's summary, even of one file or none: a snapshot directory
    // whose links all dangled said nothing at all.
    if (!quiet && fs::is_directory(src)) {
        std::printf("packed %llu safetensors file(s): %s -> %s, ratio %.4f; copied %llu other file(s); %.2f s, %.0f MB/s\n",
                    static_cast<unsigned long long>(totals.files_packed), human_bytes(totals.original).c_str(),
                    human_bytes(totals.stored).c_str(),
                    totals.original ? static_cast<double>(totals.stored) / static_cast<double>(totals.original) : 1.0,
                    static_cast<unsigned long long>(totals.files_copied), seconds,
                    static_cast<double>(totals.original) / 1e6 / seconds);
        if (totals.links_followed)
            std::printf("%llu of them behind symbolic links that lead out of %s: packed or copied in the links' place\n",
                        static_cast<unsigned long long>(totals.links_followed), printable(src.string()).c_str());
    }
    return kOk;
}

}  // namespace ptwm::tool
