// ptwmfs-tool inspect: what a store holds, per tensor and per plane, beside
// the order-0 entropy bound of each plane over the whole tensor.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "command.hpp"
#include "progress.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/base/utf8.hpp"
#include "ptwm/remote/http_client.hpp"
#include "ptwm/store/plane_stats.hpp"
#include "ptwm/store/scale_pairs.hpp"
#include "ptwm/store/store_reader.hpp"
#include "store_open.hpp"
#include "streamed_json.hpp"

namespace ptwm::tool {
namespace {

constexpr const char* kHelp =
    "usage: ptwmfs-tool inspect [OPTIONS] STORE|URL\n"
    "\n"
    "Print, per tensor: dtype, decomposition, and per plane the codecs used, plane\n"
    "bytes, stored bytes, ratio and the plane's order-0 entropy bound taken over\n"
    "the whole tensor; then the file's totals, and separately those of the FP4\n"
    "block tensors and of their block scale tensors (paired by name); the last column\n"
    "names each pair from both ends. --json adds each tensor's shape, role and pair.\n"
    "\n"
    "options:\n"
    "  --json     one JSON document instead of a table\n"
    "  --chunks   also list every chunk: its tensor, original and stored offsets and\n"
    "             lengths (with --json, also its decomposition and planes' codecs)\n"
    "\n"
    "STORE may be a URL naming one store: s3://BUCKET/PREFIX/NAME.ptwm or\n"
    "https://HOST/PATH/NAME.ptwm.\n";

double ratio(double part, double whole) { return whole > 0 ? part / whole : 1.0; }

// The columns a printable() name takes on a terminal: its code points (it
// holds only ASCII and well-formed UTF-8; wide characters count as one).
size_t columns(std::string_view shown) {
    size_t n = 0;
    for (const char c : shown) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
}

// `shown` padded with spaces to `width` columns.
std::string padded(std::string shown, size_t width) {
    const size_t used = columns(shown);
    if (used < width) shown.append(width - used, ' ');
    return shown;
}

// A plane's codecs by name, with the chunks using each: the order both the
// JSON object and the table's list show them in.
std::map<std::string, uint64_t> codecs_by_name(const PlaneStats& ps) {
    std::map<std::string, uint64_t> by_name;
    for (const auto& [codec, chunks] : ps.codecs) by_name[std::string(name(codec))] += chunks;
    return by_name;
}

}  // namespace

int inspect_main(Args& args) {
    if (printed_help(args, kHelp)) return kOk;
    const bool as_json = args.flag("json");
    const bool list_chunks = args.flag("chunks");
    const RemoteOptions remote = remote_options(args);
    const std::string path = args.positionals(1, 1)[0];
    refuse_unused(remote, {path});
    if (std::error_code ec; !is_url(path) && std::filesystem::is_directory(path, ec))
        throw Error(path + ": a directory; inspect reads one store (NAME.ptwm), and 'verify' a whole tree");
    const auto store = [&] {
        try {
            return open_store(path, remote);
        } catch (const remote::RemoteError& e) {
            // A tree's URL (s3://BUCKET/PREFIX) is no object: say what it may be.
            if (e.status() == 404 && !url_names_store(path))
                throw Error(std::string(e.what()) +
                            "; inspect reads one store (URL/NAME.ptwm), and 'verify' a whole tree at a URL");
            throw;
        }
    }();
    const auto& tensors = store->header().tensors;

    Progress progress;  // a bar on stderr while it decodes (a terminal only)
    const std::vector<TensorStats> stats = collect_plane_stats(
        *store, [&](uint64_t done, uint64_t total) { progress.update(path, done, total); });
    progress.finish();
    // FP4 weights and their block scales, paired as the packer pairs them:
    // their ratios are reported apart, since the scales are where FP4 saves.
    enum class Role { other, fp4_blocks, block_scales };
    std::vector<Role> roles(tensors.size(), Role::other);
    const auto pairs = find_scale_pairs(store->header());
    // Each pair named from both ends: a role alone does not say which of a
    // module's scale-named tensors (ModelOpt's weight_scale, weight_scale_2,
    // input_scale) the FP4 tensor was coded under, and a tensor whose chunks
    // all came out as plain bytes (under 4 KiB) shows no grouped
    // decomposition. One scale tensor may serve several FP4 tensors.
    std::vector<std::vector<uint32_t>> scales_of(tensors.size());
    for (uint32_t t = 0; t < tensors.size(); ++t)
        if (const auto& pair = pairs[t]) {
            roles[t] = Role::fp4_blocks;
            roles[pair->scale_tensor] = Role::block_scales;
            scales_of[pair->scale_tensor].push_back(t);
        }
    struct Totals {
        size_t tensors = 0;
        uint64_t original = 0, stored = 0;  // bytes, counted as the top level counts them
        double bound = 0;
    };
    Totals role_totals[3];
    double bound_total = static_cast<double>(store->prefix().size());
    for (size_t t = 0; t < tensors.size(); ++t) {
        const TensorStats& s = stats[t];
        Totals& rt = role_totals[static_cast<int>(roles[t])];
        ++rt.tensors;
        rt.original += s.original_bytes;
        rt.stored += s.stored_bytes;
        for (const PlaneStats& ps : s.planes) {
            if (ps.plane_bytes == 0) continue;  // a scale group no block fell in
            bound_total += ps.order0_bits / 8;
            rt.bound += ps.order0_bits / 8;
        }
    }
    const double file_ratio = ratio(static_cast<double>(store->stored_size()), static_cast<double>(store->original_size()));
    const double bound_ratio = ratio(bound_total, static_cast<double>(store->original_size()));

    // The per-tensor and per-chunk parts are made one tensor or chunk at a
    // time as they are printed, never held whole: as nlohmann values, a
    // file of 100,000 small tensors made a document of about 550 MB.
    if (as_json) {
        nlohmann::json doc;
        doc["file"] = path;
        doc["original_bytes"] = store->original_size();
        doc["stored_bytes"] = store->stored_size();
        doc["header_bytes"] = store->prefix().size();
        doc["ratio"] = file_ratio;
        doc["order0_bound_bytes"] = bound_total;
        doc["order0_bound_ratio"] = bound_ratio;
        const std::pair<Role, const char*> kRoleNames[] = {{Role::fp4_blocks, "fp4_blocks"}, {Role::block_scales, "block_scales"}};
        for (const auto& [role, key] : kRoleNames) {
            const Totals& rt = role_totals[static_cast<int>(role)];
            if (rt.tensors == 0) continue;
            doc[key] = {{"tensors", rt.tensors},
                        {"original_bytes", rt.original},
                        {"stored_bytes", rt.stored},
                        {"ratio", ratio(static_cast<double>(rt.stored), static_cast<double>(rt.original))},
                        {"order0_bound_bytes", rt.bound},
                        {"order0_bound_ratio", ratio(rt.bound, static_cast<double>(rt.original))}};
        }
        std::map<std::string, StreamedArray> arrays;
        doc["tensors"] = nullptr;  // placeholders: printed in their sorted places
        arrays["tensors"] = {tensors.size(), [&](size_t t) {
            const TensorStats& s = stats[t];
            nlohmann::json j{{"name", tensors[t].name},
                             {"dtype", dtype_info(tensors[t].dtype).name},
                             {"shape", tensors[t].shape},
                             {"decomposition", s.decomposition},
                             {"original_bytes", s.original_bytes},
                             {"stored_bytes", s.stored_bytes},
                             {"ratio", ratio(static_cast<double>(s.stored_bytes), static_cast<double>(s.original_bytes))}};
            if (roles[t] != Role::other) j["role"] = roles[t] == Role::fp4_blocks ? "fp4-blocks" : "block-scales";
            if (pairs[t]) j["scale_tensor"] = tensors[pairs[t]->scale_tensor].name;
            if (!scales_of[t].empty()) {
                auto& of = j["scales_of"] = nlohmann::json::array();
                for (const uint32_t b : scales_of[t]) of.push_back(tensors[b].name);
            }
            auto& jp = j["planes"] = nlohmann::json::array();
            for (size_t p = 0; p < s.planes.size(); ++p) {
                const PlaneStats& ps = s.planes[p];
                if (ps.plane_bytes == 0) continue;
                const double bound = ps.order0_bits / 8;
                jp.push_back({{"plane", p},
                              {"codecs", codecs_by_name(ps)},
                              {"plane_bytes", ps.plane_bytes},
                              {"stored_bytes", ps.stored_bytes},
                              {"ratio", ratio(static_cast<double>(ps.stored_bytes), static_cast<double>(ps.plane_bytes))},
                              {"order0_bound_bytes", bound},
                              {"order0_bound_ratio", ratio(bound, static_cast<double>(ps.plane_bytes))}});
            }
            return j;
        }};
        if (list_chunks) {
            doc["chunks"] = nullptr;
            arrays["chunks"] = {store->chunk_count(), [&](size_t i) {
                const ChunkEntry& e = store->chunk(i);
                std::vector<std::string> codecs;
                std::vector<uint32_t> lengths;
                for (unsigned p = 0; p < e.plane_count; ++p) {
                    codecs.emplace_back(name(e.codec[p]));
                    lengths.push_back(e.payload_length[p]);
                }
                return nlohmann::json{{"index", i}, {"tensor", tensors[e.tensor].name},
                                      {"original_offset", e.original_offset}, {"original_length", e.original_length},
                                      {"stored_offset", e.stored_offset}, {"stored_length", e.stored_length()},
                                      {"decomposition", name(e.decomposition)}, {"codecs", codecs},
                                      {"payload_lengths", lengths}};
            }};
        }
        // A display: a file or tensor name that is not UTF-8 (JSON holds
        // UTF-8 only) is shown with U+FFFD for each bad byte, not refused.
        print_json(stdout, doc, arrays);
        return kOk;
    }
    // The table is for a terminal: a name from the file (a hostile one may
    // hold ESC [ ... or a newline) is shown with its control characters and
    // bytes that are not UTF-8 as \xHH, never sent as they are.
    // The name column as wide as the longest name: names of real checkpoints
    // run to 60 characters and more, and differ at their ends (gpt-oss's
    // X_blocks and X_scales, ModelOpt's X.weight_scale and X.weight_scale_2).
    std::vector<std::string> shown(tensors.size());
    size_t name_width = columns("tensor");
    for (size_t t = 0; t < tensors.size(); ++t) {
        shown[t] = printable(tensors[t].name);
        name_width = std::max(name_width, columns(shown[t]));
    }
    // The pair, on a paired tensor's first row: "scales NAME" on the FP4
    // tensor, "scales of NAME[, NAME]" on its scale tensor.
    const auto pair_text = [&](size_t t) {
        std::string text;
        if (pairs[t]) text = "scales " + printable(tensors[pairs[t]->scale_tensor].name);
        for (const uint32_t b : scales_of[t]) text += (text.empty() ? "scales of " : ", ") + printable(tensors[b].name);
        return text;
    };
    std::printf("%s %-8s %-16s %5s %-12s %12s %12s %7s %7s  %s\n", padded("tensor", name_width).c_str(), "dtype",
                "decomposition", "plane", "codecs", "plane bytes", "stored", "ratio", "bound", "pair");
    for (size_t t = 0; t < tensors.size(); ++t) {
        const TensorStats& s = stats[t];
        const std::string dtype(dtype_info(tensors[t].dtype).name);
        bool first = true;
        for (size_t p = 0; p < s.planes.size(); ++p) {
            const PlaneStats& ps = s.planes[p];
            if (ps.plane_bytes == 0) continue;  // a scale group no block fell in
            std::string codecs;
            for (const auto& [c, n] : codecs_by_name(ps)) codecs += (codecs.empty() ? "" : ",") + c;
            const double bound = ps.order0_bits / 8;
            const std::string pair = first ? pair_text(t) : "";
            std::printf("%s %-8s %-16s %5d %-12s %12llu %12llu %7.4f %7.4f%s%s\n", padded(first ? shown[t] : "", name_width).c_str(),
                        first ? dtype.c_str() : "", first ? s.decomposition.c_str() : "", static_cast<int>(p), codecs.c_str(),
                        static_cast<unsigned long long>(ps.plane_bytes), static_cast<unsigned long long>(ps.stored_bytes),
                        ratio(static_cast<double>(ps.stored_bytes), static_cast<double>(ps.plane_bytes)),
                        ratio(bound, static_cast<double>(ps.plane_bytes)), pair.empty() ? "" : "  ", pair.c_str());
            first = false;
        }
        if (first) {  // an empty tensor: no planes, but a row, as --json lists it
            const std::string pair = pair_text(t);
            std::printf("%s %-8s %-16s %5s %-12s %12d %12d %7s %7s%s%s\n", padded(shown[t], name_width).c_str(), dtype.c_str(),
                        s.decomposition.c_str(), "-", "-", 0, 0, "-", "-", pair.empty() ? "" : "  ", pair.c_str());
        }
    }
    std::printf("\n%s: %llu -> %llu bytes, ratio %.4f; order-0 per-plane bound %.4f (header %llu bytes)\n",
                printable(path).c_str(), static_cast<unsigned long long>(store->original_size()),
                static_cast<unsigned long long>(store->stored_size()), file_ratio, bound_ratio,
                static_cast<unsigned long long>(store->prefix().size()));
    for (const auto& [role, label] : {std::pair{Role::fp4_blocks, "fp4 blocks"}, std::pair{Role::block_scales, "block scales"}}) {
        const Totals& rt = role_totals[static_cast<int>(role)];
        if (rt.tensors == 0) continue;
        std::printf("  %-13s %4zu tensors: %llu -> %llu bytes, ratio %.4f; order-0 per-plane bound %.4f\n", label,
                    rt.tensors, static_cast<unsigned long long>(rt.original), static_cast<unsigned long long>(rt.stored),
                    ratio(static_cast<double>(rt.stored), static_cast<double>(rt.original)),
                    ratio(rt.bound, static_cast<double>(rt.original)));
    }
    if (list_chunks)
        for (size_t i = 0; i < store->chunk_count(); ++i) {
            const ChunkEntry& e = store->chunk(i);
            std::printf("chunk %llu %s original %llu+%u stored %llu+%llu\n", static_cast<unsigned long long>(i),
                        printable(tensors[e.tensor].name).c_str(), static_cast<unsigned long long>(e.original_offset),
                        static_cast<unsigned>(e.original_length), static_cast<unsigned long long>(e.stored_offset),
                        static_cast<unsigned long long>(e.stored_length()));
        }
    return kOk;
}

}  // namespace ptwm::tool
