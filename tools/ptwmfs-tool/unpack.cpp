// ptwmfs-tool unpack: stores -> the byte-identical originals.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>

#include "command.hpp"
#include "progress.hpp"
#include "ptwm/base/cancellation.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/base/file_io.hpp"
#include "ptwm/base/utf8.hpp"
#include "ptwm/store/store_decoder.hpp"
#include "ptwm/store/store_names.hpp"
#include "store_open.hpp"
#include "tree.hpp"

namespace ptwm::tool {
namespace {

constexpr const char* kHelp =
    "usage: ptwmfs-tool unpack [OPTIONS] SRC DST\n"
    "\n"
    "Restore the original files. SRC is a store (DST is then the output file, or a\n"
    "directory to put NAME in) or a directory made by 'pack' (mirrored into DST:\n"
    "NAME.ptwm becomes NAME, other files are copied, symlinks stay links, but for\n"
    "links to files or stores outside SRC, as a packed Hugging Face snapshot's into\n"
    "its blobs: their files are copied or unpacked in their place).\n"
    "Every chunk's checksum is checked; outputs appear only when complete.\n"
    "\n"
    "options:\n"
    "  -j, --threads N   decoder threads, 1-1024 (default or 0: all cores; one more writes)\n"
    "  -q, --quiet       print no summary\n"
    "\n"
    "DST '-' writes one store's original bytes to standard output (not to a\n"
    "terminal), in order, as they are decoded; the summary then goes to stderr.\n"
    "\n"
    "SRC may be a URL: s3://BUCKET/PREFIX or https://HOST/PATH/ (a tree packed there,\n"
    "read through its manifest), or .../NAME.ptwm (one store).\n";

// All of `bytes` to standard output, `offset` being where they start in
// the original (for the message).
void write_stdout(uint64_t offset, std::span<const uint8_t> bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t w = ::write(STDOUT_FILENO, bytes.data() + done, bytes.size() - done);
        if (w < 0) {
            if (errno == EINTR) continue;
            throw_errno("standard output", "write failed at offset " + std::to_string(offset + done));
        }
        done += static_cast<size_t>(w);
    }
}

}  // namespace

int unpack_main(Args& args) {
    if (printed_help(args, kHelp)) return kOk;
    DecodeAllOptions opt;
    std::string value;
    if (args.option("threads", "j", value)) opt.threads = parse_threads(value);
    const bool quiet = args.flag("quiet", "q");
    const RemoteOptions remote = remote_options(args);
    const auto pos = args.positionals(2, 2);
    refuse_unused(remote, pos);
    const fs::path src = pos[0];
    fs::path dst = pos[1];

    // '-': one store's bytes to standard output. Not a tree's, and not to a
    // terminal, where binary bytes would be garbage and escape sequences.
    const bool to_stdout = pos[1] == "-";
    if (to_stdout) {
        if (is_url(pos[0]) ? !url_names_store(pos[0]) : fs::is_directory(src))
            throw UsageError{"'-' (standard output) takes one store, not the tree " + pos[0]};
        if (::isatty(STDOUT_FILENO) == 1)
            throw UsageError{"standard output is a terminal: redirect it, or give a file as DST"};
    }

    Progress progress;
    uint64_t total = 0;
    const auto start = std::chrono::steady_clock::now();
    const auto print_summary = [&] {
        if (quiet) return;
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::fprintf(to_stdout ? stderr : stdout, "unpacked %s in %.3f s (%.0f MB/s)\n", human_bytes(total).c_str(),
                     seconds, static_cast<double>(total) / 1e6 / seconds);
    };
    // `mode`: the store's own permission bits (the original's, as pack kept
    // them); `times`: the store's stat, whose modification time (the
    // original's, as pack kept it) the output takes, or none (an object
    // store's).
    auto unpack_store = [&](const StoreReader* store_ptr, const std::string& label, const fs::path& out, unsigned mode,
                            const struct stat* times = nullptr, Durability durability = Durability::kFsync) {
        const auto& store = store_ptr;
        opt.progress = [&](uint64_t done, uint64_t all) { progress.update(label, done, all); };
        if (to_stdout) {
            decode_all(*store, opt, write_stdout);
        } else {
            remove_abandoned_temporaries(out);
            AtomicOutput file(out, mode, durability);
            if (times) file.keep_modification_time(*times);
            decode_all(*store, opt, [&](uint64_t offset, std::span<const uint8_t> bytes) { file.write_at(offset, bytes); });
            file.commit();
        }
        progress.finish();
        total += store->original_size();
    };
    auto unpack_one = [&](const fs::path& in, const fs::path& out, Durability durability = Durability::kFsync) {
        if (!to_stdout) require_other_file(in, out);  // (a destination may link back into the source)
        const auto store = StoreReader::open(in);
        struct stat st {};
        const bool stated = ::stat(in.c_str(), &st) == 0;
        unpack_store(store.get(), in.filename().string(), out, stated ? st.st_mode & 0666 : 0666, stated ? &st : nullptr,
                     durability);
    };

    if (is_url(pos[0])) {
        if (url_names_store(pos[0])) {
            const auto store = open_store(pos[0], remote);
            const std::string leaf = pos[0].substr(pos[0].rfind('/') + 1);
            if (!to_stdout && fs::is_directory(dst)) dst /= original_name(leaf);
            unpack_store(store.get(), leaf, dst, 0666);
        } else {
            const RemoteTree tree = open_remote_tree(pos[0], remote);
            std::error_code ec;
            StagedDirectory staged(dst);  // a new DST appears whole or not at all
            fs::create_directories(staged.path(), ec);
            if (ec) throw Error(dst.string() + ": cannot create directory: " + ec.message());
            using Kind = remote::ManifestEntry::Kind;
            for (const auto& e : tree.manifest.entries) {
                throw_if_cancelled();
                const fs::path out = staged.path() / e.path;
                if (e.kind == Kind::kDirectory) {
                    fs::create_directories(out, ec);
                    if (ec) throw Error(out.string() + ": cannot create directory: " + ec.message());
                } else if (e.kind == Kind::kLink) {
                    fs::remove(out, ec);
                    fs::create_symlink(e.target, out, ec);
                    if (ec) throw Error(out.string() + ": cannot create symlink: " + ec.message());
                } else if (e.kind == Kind::kStore) {
                    unpack_store(tree.open_store(e.path).get(), e.path, original_name(out), e.mode, nullptr,
                                 staged.durability());
                } else {
                    remove_abandoned_temporaries(out);
                    AtomicOutput file(out, e.mode, staged.durability());
                    tree.read(e.path, e.size, [&](uint64_t at, std::span<const uint8_t> bytes) { file.write_at(at, bytes); });
                    file.commit();
                }
            }
            tree.require_unchanged();  // (a new DST is not there yet; an existing one is rewritten by the next run)
            staged.commit();
        }
        print_summary();
        return kOk;
    }

    if (fs::is_directory(src)) {
        require_outside(src, dst);
        StagedDirectory staged(dst);  // a new DST appears whole or not at all
        size_t stores = 0;
        mirror_tree(src, staged.path(), [&](const fs::path& in, const fs::path& out) {
            // pack --manifest's own file describes the packed tree, not the original.
            if (in == src / remote::kManifestName) return;
            if (is_store_name(in)) {
                unpack_one(in, original_name(out), staged.durability());
                ++stores;
            } else {
                copy_file_atomic(in, out, staged.durability());
            }
        }, LinksOut::followed_to_stores);  // (a packed snapshot's links into ../../blobs: their files in their place)
        staged.commit();
        // Said, as verify says it: an original tree given by mistake was
        // copied with "unpacked 0 B" and nothing else.
        if (stores == 0)
            std::fprintf(stderr, "ptwmfs-tool unpack: warning: %s holds no store (not a packed tree?): its files were copied\n",
                         printable(src.string()).c_str());
    } else {
        if (!to_stdout && fs::is_directory(dst)) dst /= original_name(src.filename());
        unpack_one(local_store_path(src.string()), dst);
    }
    print_summary();
    return kOk;
}

}  // namespace ptwm::tool
