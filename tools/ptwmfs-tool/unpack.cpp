// ptwmfs-tool unpack: stores -> the byte-identical originals.
#include <chrono>
#include <cstdio>

#include "command.hpp"
#include "progress.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/base/file_io.hpp"
#include "ptwm/store/store_decoder.hpp"
#include "store_names.hpp"
#include "tree.hpp"

namespace ptwm::tool {
namespace {

constexpr const char* kHelp =
    "usage: ptwmfs-tool unpack [OPTIONS] SRC DST\n"
    "\n"
    "Restore the original files. SRC is a store (DST is then the output file, or a\n"
    "directory to put NAME in) or a directory made by 'pack' (mirrored into DST:\n"
    "NAME.ptwm becomes NAME, other files are copied, symlinks stay links).\n"
    "Every chunk's checksum is checked; outputs appear only when complete.\n"
    "\n"
    "options:\n"
    "  -j, --threads N   decoder threads (default: all cores)\n"
    "  -q, --quiet       print no summary\n";

}  // namespace

int unpack_main(Args& args) {
    if (args.flag("help", "h")) {
        std::fputs(kHelp, stdout);
        return kOk;
    }
    DecodeAllOptions opt;
    std::string value;
    if (args.option("threads", "j", value)) opt.threads = static_cast<unsigned>(parse_count(value, "--threads"));
    const bool quiet = args.flag("quiet", "q");
    const auto pos = args.positionals(2, 2);
    const fs::path src = pos[0];
    fs::path dst = pos[1];

    Progress progress;
    uint64_t total = 0;
    const auto start = std::chrono::steady_clock::now();
    auto unpack_one = [&](const fs::path& in, const fs::path& out) {
        const auto store = StoreReader::open(in);
        AtomicOutput file(out);
        const std::string label = in.filename().string();
        opt.progress = [&](uint64_t done, uint64_t all) { progress.update(label, done, all); };
        decode_all(*store, opt, [&](uint64_t offset, std::span<const uint8_t> bytes) { file.write_at(offset, bytes); });
        file.commit();
        progress.finish();
        total += store->original_size();
    };

    if (fs::is_directory(src)) {
        mirror_tree(src, dst, [&](const fs::path& in, const fs::path& out) {
            if (is_store_name(in)) unpack_one(in, original_name(out));
            else copy_file_atomic(in, out);
        });
    } else {
        if (fs::is_directory(dst)) dst /= original_name(src.filename());
        unpack_one(src, dst);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!quiet)
        std::printf("unpacked %s in %.3f s (%.0f MB/s)\n", human_bytes(total).c_str(), seconds,
                    static_cast<double>(total) / 1e6 / seconds);
    return kOk;
}

}  // namespace ptwm::tool
