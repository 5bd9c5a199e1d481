// codec_bench: ptwmfs against zstd and ZipNN on real safetensors files, side by side.
//
// For each file it measures, in ONE process and interleaved repetition by
// repetition (the machine is shared and noisy: peers must see the same noise,
// and the best of several repetitions is the least disturbed one):
//   - compression ratios: ours (pack_file at --level), zstd -3 and -19 of
//     the whole file (libzstd in process; the zstd 1.5.4 CLI gives the same
//     sizes plus a few bytes of frame header), ZipNN per tensor (a child
//     process under .venv's python: zipnn_peer.py);
//   - the order-0 bounds our ratio is judged against (see compute_bounds);
//   - coding throughput in memory (no file I/O), 1 thread and all cores;
//   - end-to-end command-line throughput of ptwmfs-tool against the zstd CLI.
// See README.md in this directory for what each column means.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_types.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/base/file_io.hpp"
#include "ptwm/base/parallel.hpp"
#include "ptwm/codecs/codec.hpp"
#include "ptwm/planes/dtype.hpp"
#include "ptwm/store/chunk_codec.hpp"
#include "ptwm/store/plane_stats.hpp"
#include "ptwm/store/safetensors.hpp"
#include "ptwm/store/store_reader.hpp"
#include "ptwm/store/store_writer.hpp"
#include "report.hpp"
#include "timing.hpp"
#include "zipnn_peer.hpp"
#include "zstd_peer.hpp"

namespace fs = std::filesystem;
using namespace bench;

namespace {

constexpr const char* kUsage =
    "usage: codec_bench [OPTIONS] [FILE|DIR ...]\n"
    "\n"
    "Compare ptwmfs with zstd and ZipNN on .safetensors files (default: the shared\n"
    "corpus, SOURCE_ROOT/../shared/corpus): ratios, order-0 bounds, in-memory and\n"
    "command-line throughput, all measured interleaved in one run.\n"
    "\n"
    "options:\n"
    "  --reps N       repetitions of every in-memory timing, best kept (default 5)\n"
    "  --cli-reps N   rounds of the command-line timings, each command once a round\n"
    "                 (default 11; their targets are judged on the median round)\n"
    "  --level N      ptwmfs encode level 1..9 (default 3, the tool's default)\n"
    "  --threads N    'all cores' thread count (default: hardware concurrency)\n"
    "  --tool PATH    ptwmfs-tool binary (default: ../ptwmfs-tool/ptwmfs-tool\n"
    "                 next to this executable in the build tree)\n"
    "  --zstd PATH    zstd CLI binary (default: zstd from PATH)\n"
    "  --no-cli       skip the command-line timings\n"
    "  --tmp DIR      scratch directory for stores and outputs (default /dev/shm)\n"
    "  --zipnn-python PATH  python with zipnn installed (default SOURCE_ROOT/.venv/bin/python,\n"
    "                 made by tools/install-deps.sh); ZipNN's columns are '-' without it\n"
    "  --no-zipnn     skip ZipNN\n"
    "  --json         one JSON document on stdout instead of the table\n";

bool is_f8(ptwm::DType d) { return d == ptwm::DType::F8_E4M3 || d == ptwm::DType::F8_E5M2; }

// ---------------------------------------------------------------------------
// Bounds

// The same computation as `ptwmfs-tool inspect` (tools/ptwmfs-tool/inspect.cpp):
// decode every chunk of the packed store, split it with the decomposition the
// store used for it, and take one histogram per (tensor, plane), so a
// plane's entropy is taken over the whole tensor, not per chunk. For F8
// tensors it also takes the bound of the whole bytes: the nibble split is
// only worth having if it beats that.
Bounds compute_bounds(const ptwm::StoreReader& store) {
    const auto& tensors = store.header().tensors;
    const std::vector<ptwm::TensorStats> stats = ptwm::collect_plane_stats(store);
    Bounds b;
    b.header_bytes = static_cast<double>(store.prefix().size());
    b.plane_bound_bytes = b.byte_bound_bytes = b.header_bytes;
    for (size_t t = 0; t < tensors.size(); ++t) {
        b.dtype_bytes[std::string(ptwm::dtype_info(tensors[t].dtype).name)] += tensors[t].size();
        double plane_bits = 0;
        for (const auto& p : stats[t].planes) plane_bits += p.order0_bits;
        b.plane_bound_bytes += plane_bits / 8;
        if (is_f8(tensors[t].dtype)) {
            b.has_f8 = true;
            b.byte_bound_bytes += stats[t].whole_order0_bits / 8;
        } else {
            b.byte_bound_bytes += plane_bits / 8;
        }
    }
    return b;
}

// ---------------------------------------------------------------------------
// In-memory coding

// The source reader pack_file's planner takes, over a file in memory.
ptwm::SourceReader memory_reader(std::span<const uint8_t> file) {
    return [file](uint64_t offset, std::span<uint8_t> out) {
        std::memcpy(out.data(), file.data() + offset, out.size());
    };
}

// Plan + encode every chunk, the CPU work of pack_file without its reads and
// writes. The plan is made on one thread, as pack_file does.
double time_encode(std::span<const uint8_t> file, const ptwm::SafetensorsHeader& h, const ptwm::EncodeOptions& opt,
                   unsigned threads, uint64_t* stored_bytes) {
    const auto start = Clock::now();
    const auto read = memory_reader(file);
    const auto plan = ptwm::plan_chunks(h, ptwm::kDefaultChunkBytes, read);
    std::vector<size_t> sizes(plan.size());
    ptwm::parallel_for(plan.size(), threads, [&](size_t i) {
        const ptwm::PlannedChunk& c = plan[i];
        const auto scales = ptwm::planned_chunk_scales(h, c, read);
        sizes[i] = ptwm::encode_chunk(file.subspan(c.offset, c.length), c.decomposition, opt, scales,
                                      ptwm::tensor_layout(h.tensors[c.tensor], c.offset, c.block_scales))
                       .payload.size();
    });
    const double s = seconds_since(start);
    if (stored_bytes) {
        *stored_bytes = 0;
        for (size_t n : sizes) *stored_bytes += n;
    }
    return s;
}

// Decode every chunk into `out` (the whole original file) with
// StoreReader::decode_chunk, which is what unpack and the FUSE daemon call:
// a pread of the payload (from /dev/shm: a memcpy from the page cache), the
// plane decoders, the merge and the XXH3 checksum.
double time_decode_store(const ptwm::StoreReader& store, std::span<uint8_t> out, unsigned threads) {
    const auto start = Clock::now();
    std::memcpy(out.data(), store.prefix().data(), store.prefix().size());
    ptwm::parallel_for(store.chunk_count(), threads, [&](size_t i) {
        const ptwm::ChunkEntry& e = store.chunk(i);
        store.decode_chunk(i, out.subspan(e.original_offset, e.original_length));
    });
    return seconds_since(start);
}

// The same decode from the store's bytes already in memory
// (decode_chunk_payload): pure coding cost, the fair peer of ZSTD_decompress.
// Grouped FP4 chunks decode with their block scales, which the store
// decodes from another tensor; gathered before timing, as in memory.
std::vector<std::vector<uint8_t>> all_chunk_scales(const ptwm::StoreReader& store) {
    std::vector<std::vector<uint8_t>> scales(store.chunk_count());
    for (size_t i = 0; i < store.chunk_count(); ++i) scales[i] = store.chunk_scales(i);
    return scales;
}

double time_decode_payload(const ptwm::StoreReader& store, std::span<const uint8_t> store_bytes,
                           const std::vector<std::vector<uint8_t>>& scales, std::span<uint8_t> out, unsigned threads) {
    const auto start = Clock::now();
    std::memcpy(out.data(), store.prefix().data(), store.prefix().size());
    ptwm::parallel_for(store.chunk_count(), threads, [&](size_t i) {
        const ptwm::ChunkEntry& e = store.chunk(i);
        ptwm::decode_chunk_payload(e, store_bytes.subspan(e.stored_offset, e.stored_length()),
                                   out.subspan(e.original_offset, e.original_length), scales[i], store.chunk_layout(i));
    });
    return seconds_since(start);
}

// ---------------------------------------------------------------------------
// One file

// The dtype holding most tensor bytes names the file's row; an F8 file (its
// side tensors are BF16 and F32) is named by its F8 dtype.
std::string main_dtype(const Bounds& b) {
    std::string best;
    uint64_t most = 0;
    for (const auto& [name, bytes] : b.dtype_bytes) {
        if (b.has_f8 && name.rfind("F8_", 0) == 0) return name;
        if (bytes > most) most = bytes, best = name;
    }
    return best;
}

FileResult bench_file(const std::string& path, const Options& opt, ZipnnPeer* zipnn) {
    FileResult r;
    r.path = path;
    r.name = fs::path(path).filename().string();
    const std::string suffix = ".safetensors";
    if (r.name.size() > suffix.size() && r.name.ends_with(suffix)) r.name.resize(r.name.size() - suffix.size());
    const std::vector<uint8_t> original = ptwm::read_whole_file(path);
    r.size = original.size();
    const ptwm::SafetensorsHeader header = ptwm::read_safetensors_header(path);

    // Scratch names carry the pid: two benches on one machine must not collide.
    const std::string tag = opt.tmp + "/codec_bench." + std::to_string(getpid());
    const std::string store_path = tag + ".ptwm", unpacked_path = tag + ".out", zst_path = tag + ".zst",
                      cli_store_path = tag + ".cli.ptwm";

    // Our ratio: the real packer, so the store is exactly what ptwmfs-tool writes.
    ptwm::PackOptions pack_opt;
    pack_opt.encode.level = opt.level;
    r.stored = ptwm::pack_file(path, store_path, pack_opt).stored_bytes;
    const auto store = ptwm::StoreReader::open(store_path);
    const std::vector<uint8_t> store_bytes = ptwm::read_whole_file(store_path);
    const auto scales = all_chunk_scales(*store);
    r.bounds = compute_bounds(*store);
    r.micro = measure_microscaling(*store);
    r.dtype = main_dtype(r.bounds);

    Zstd zstd;
    std::vector<uint8_t> zbuf, z3;
    r.zstd19 = zstd.compress(original, zbuf, 19);
    r.zstd3 = zstd.compress(original, z3, 3);

    // ZipNN compresses the file once and checks its own round trip first.
    auto zipnn_failed = [&](const std::exception& e) {
        std::fprintf(stderr, "codec_bench: %s: ZipNN: %s\n", path.c_str(), e.what());
        r.zipnn = false;
        r.zipnn_c.clear();
        r.zipnn_d.clear();
    };
    if (zipnn && zipnn->running()) try {
        const ZipnnOpen z = zipnn->open(path);
        r.zipnn_stored = z.stored;
        r.zipnn_coded = z.coded;
        r.zipnn = true;
    } catch (const std::exception& e) {
        zipnn_failed(e);
    }

    // Round-trip check before any timing: a fast wrong decoder is no result.
    std::vector<uint8_t> decoded(r.size);
    time_decode_store(*store, decoded, 1);
    if (decoded != original) throw ptwm::Error(path + ": the store does not decode to the original");

    if (opt.cli) {
        std::vector<std::string> args = {opt.tool, "pack", "-q", "-j1", "--level", std::to_string(opt.level), path, cli_store_path};
        if (!time_command(args)) r.cli_failed = true;  // also warms the page cache and checks the tool runs
    }

    ptwm::EncodeOptions enc;
    enc.level = opt.level;
    const unsigned n = opt.threads;
    const std::string jn = "-j" + std::to_string(n);
    const std::string level = std::to_string(opt.level);
    const int rounds = std::max(opt.reps, opt.cli ? opt.cli_reps : 0);
    // Interleaved: every round measures every peer once, so a burst of noise
    // from other users of the machine hits all of them alike.
    for (int round = 0; round < rounds; ++round) {
        if (round < opt.reps) {
            measure(r.pack1, [&] { time_encode(original, header, enc, 1, nullptr); });
            r.packN.add(time_encode(original, header, enc, n, nullptr));
            measure(r.unpack1, [&] { time_decode_store(*store, decoded, 1); });
            r.unpackN.add(time_decode_store(*store, decoded, n));
            measure(r.unpack1_payload, [&] { time_decode_payload(*store, store_bytes, scales, decoded, 1); });
            r.unpackN_payload.add(time_decode_payload(*store, store_bytes, scales, decoded, n));
            measure(r.z3c, [&] { zstd.compress(original, zbuf, 3); });
            measure(r.z3d, [&] { zstd.decompress(z3, decoded); });
            if (r.zipnn) try {
                const ZipnnRound z = zipnn->round();
                r.zipnn_c.add(z.compress_s, z.compress_cpu_s);
                r.zipnn_d.add(z.decompress_s, z.decompress_cpu_s);
            } catch (const std::exception& e) {
                zipnn_failed(e);
            }
        }
        if (opt.cli && !r.cli_failed && round < opt.cli_reps) {
            auto run = [&](Best& best, const std::vector<std::string>& args) {
                if (const auto t = time_command(args)) best.add(t->wall, t->cpu);
                else r.cli_failed = true;
            };
            run(r.cli_pack1, {opt.tool, "pack", "-q", "-j1", "--level", level, path, cli_store_path});
            run(r.cli_packN, {opt.tool, "pack", "-q", jn, "--level", level, path, cli_store_path});
            run(r.cli_z3c, {opt.zstd, "-3", "-T1", "-q", "-f", path, "-o", zst_path});
            run(r.cli_unpack1, {opt.tool, "unpack", "-q", "-j1", cli_store_path, unpacked_path});
            run(r.cli_unpackN, {opt.tool, "unpack", "-q", jn, cli_store_path, unpacked_path});
            run(r.cli_z3d, {opt.zstd, "-d", "-T1", "-q", "-f", zst_path, "-o", unpacked_path});
        }
    }
    for (const auto& p : {store_path, unpacked_path, zst_path, cli_store_path}) fs::remove(p);
    return r;
}

// ---------------------------------------------------------------------------
// Arguments and inputs

fs::path self_dir() {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path(".") : exe.parent_path();
}

int parse_int(const std::string& text, const std::string& what, int lo, int hi) {
    try {
        size_t used = 0;
        const int v = std::stoi(text, &used);
        if (used == text.size() && v >= lo && v <= hi) return v;
    } catch (const std::exception&) {
    }
    throw std::invalid_argument(what + " takes a number from " + std::to_string(lo) + " to " + std::to_string(hi));
}

Options parse_args(int argc, char** argv) {
    Options opt;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
            return argv[++i];
        };
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        } else if (a == "--reps") opt.reps = parse_int(value(), a, 1, 1000);
        else if (a == "--cli-reps") opt.cli_reps = parse_int(value(), a, 1, 1000);
        else if (a == "--level") opt.level = parse_int(value(), a, 1, 9);
        else if (a == "--threads") opt.threads = static_cast<unsigned>(parse_int(value(), a, 1, 1024));
        else if (a == "--tool") opt.tool = value();
        else if (a == "--zstd") opt.zstd = value();
        else if (a == "--tmp") opt.tmp = value();
        else if (a == "--no-cli") opt.cli = false;
        else if (a == "--json") opt.json = true;
        else if (a == "--zipnn-python") opt.zipnn_python = value();
        else if (a == "--no-zipnn") opt.zipnn = false;
        else if (a.size() > 1 && a[0] == '-') throw std::invalid_argument("unknown option " + a);
        else opt.inputs.push_back(a);
    }
    if (opt.tool.empty()) opt.tool = (self_dir() / ".." / "ptwmfs-tool" / "ptwmfs-tool").lexically_normal().string();
    return opt;
}

// Files named directly are taken as they are; directories contribute their
// *.safetensors files, sorted so runs are comparable.
std::vector<std::string> collect_files(const std::vector<std::string>& inputs) {
    std::vector<std::string> files;
    for (const auto& in : inputs) {
        if (!fs::is_directory(in)) {
            files.push_back(in);
            continue;
        }
        std::vector<std::string> found;
        for (const auto& entry : fs::directory_iterator(in))
            if (entry.is_regular_file() && entry.path().extension() == ".safetensors") found.push_back(entry.path().string());
        std::sort(found.begin(), found.end());
        files.insert(files.end(), found.begin(), found.end());
    }
    return files;
}

}  // namespace

int main(int argc, char** argv) {
    Options opt;
    try {
        opt = parse_args(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "codec_bench: %s\n\n%s", e.what(), kUsage);
        return 2;
    }
    if (opt.inputs.empty()) {
        // The corpus lives beside the repository; meson tells us where the
        // source tree is, which does not depend on where the build dir is.
        const fs::path corpus = (fs::path(PTWM_SOURCE_ROOT) / ".." / "shared" / "corpus").lexically_normal();
        if (!fs::is_directory(corpus)) {
            std::fprintf(stderr, "codec_bench: no corpus at %s: pass .safetensors files or a directory\n",
                         corpus.c_str());
            return 2;
        }
        opt.inputs.push_back(corpus.string());
    }
    if (opt.cli && access(opt.tool.c_str(), X_OK) != 0) {
        std::fprintf(stderr, "codec_bench: ptwmfs-tool not found at %s: pass --tool PATH or --no-cli\n", opt.tool.c_str());
        return 2;
    }

    const auto files = collect_files(opt.inputs);
    if (files.empty()) {
        std::fprintf(stderr, "codec_bench: no .safetensors files found\n");
        return 2;
    }
    // ZipNN runs in a child process for the whole run; without it its
    // columns are '-' and one line says why.
    ZipnnPeer zipnn;
    if (opt.zipnn) {
        if (const auto why = zipnn.start(opt.zipnn_python, opt.zipnn_script))
            std::fprintf(stderr, "codec_bench: ZipNN columns '-': %s\n", why->c_str());
    }
    std::vector<FileResult> results;
    nlohmann::json doc = nlohmann::json::array();
    int failures = 0;
    for (const auto& file : files) {
        try {
            if (!opt.json) std::fprintf(stderr, "codec_bench: %s ...\n", file.c_str());
            results.push_back(bench_file(file, opt, &zipnn));
            doc.push_back(to_json(results.back(), opt));
        } catch (const std::exception& e) {
            std::fprintf(stderr, "codec_bench: %s: %s\n", file.c_str(), e.what());
            ++failures;
        }
    }
    if (opt.json) std::printf("%s\n", doc.dump(2).c_str());
    else print_table(results, opt);
    return failures ? 1 : 0;
}
