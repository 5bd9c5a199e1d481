// ptwmfs-tool inspect: what a store holds, per tensor and per plane, beside
// the order-0 entropy bound of each plane over the whole tensor.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "command.hpp"
#include "progress.hpp"
#include "ptwm/base/utf8.hpp"
#include "ptwm/store/plane_stats.hpp"
#include "ptwm/store/scale_pairs.hpp"
#include "ptwm/store/store_reader.hpp"
#include "store_open.hpp"

namespace ptwm::tool {
namespace {

constexpr const char* kHelp =
    "usage: ptwmfs-tool inspect [OPTIONS] STORE|URL\n"
    "\n"
    "Print, per tensor: dtype, shape, decomposition, and per plane the codecs used,\n"
    "plane bytes, stored bytes, ratio and the plane's order-0 entropy bound taken\n"
    "over the whole tensor; then the file's totals, and separately those of the\n"
    "FP4 block tensors and of their block scale tensors (paired by name).\n"
    "\n"
    "options:\n"
    "  --json     one JSON document instead of a table\n"
    "  --chunks   also list every chunk (offsets, lengths, codecs)\n"
    "\n"
    "STORE may be a URL naming one store: s3://BUCKET/PREFIX/NAME.ptwm or\n"
    "https://HOST/PATH/NAME.ptwm.\n";

double ratio(double part, double whole) { return whole > 0 ? part / whole : 1.0; }

}  // namespace

int inspect_main(Args& args) {
    if (printed_help(args, kHelp)) return kOk;
    const bool as_json = args.flag("json");
    const bool list_chunks = args.flag("chunks");
    const RemoteOptions remote = remote_options(args);
    const std::string path = args.positionals(1, 1)[0];
    const auto store = open_store(path, remote);
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
    for (uint32_t t = 0; t < tensors.size(); ++t)
        if (const auto& pair = pairs[t]) {
            roles[t] = Role::fp4_blocks;
            roles[pair->scale_tensor] = Role::block_scales;
        }
    struct Totals {
        size_t tensors = 0;
        uint64_t original = 0, stored = 0;  // bytes, counted as the top level counts them
        double bound = 0;
    };
    Totals role_totals[3];

    nlohmann::json doc;
    doc["file"] = path;
    doc["original_bytes"] = store->original_size();
    doc["stored_bytes"] = store->stored_size();
    doc["header_bytes"] = store->prefix().size();
    double bound_total = static_cast<double>(store->prefix().size());
    auto& jt = doc["tensors"] = nlohmann::json::array();
    for (size_t t = 0; t < tensors.size(); ++t) {
        const TensorStats& s = stats[t];
        nlohmann::json j{{"name", tensors[t].name},
                         {"dtype", dtype_info(tensors[t].dtype).name},
                         {"shape", tensors[t].shape},
                         {"decomposition", s.decomposition},
                         {"original_bytes", s.original_bytes},
                         {"stored_bytes", s.stored_bytes},
                         {"ratio", ratio(static_cast<double>(s.stored_bytes), static_cast<double>(s.original_bytes))}};
        if (roles[t] != Role::other) j["role"] = roles[t] == Role::fp4_blocks ? "fp4-blocks" : "block-scales";
        Totals& rt = role_totals[static_cast<int>(roles[t])];
        ++rt.tensors;
        rt.original += s.original_bytes;
        rt.stored += s.stored_bytes;
        auto& jp = j["planes"] = nlohmann::json::array();
        for (size_t p = 0; p < s.planes.size(); ++p) {
            const PlaneStats& ps = s.planes[p];
            if (ps.plane_bytes == 0) continue;  // a scale group no block fell in
            const double bound = order0_bits(ps.histogram) / 8;
            bound_total += bound;
            rt.bound += bound;
            jp.push_back({{"plane", p},
                          {"codecs", ps.codecs},
                          {"plane_bytes", ps.plane_bytes},
                          {"stored_bytes", ps.stored_bytes},
                          {"ratio", ratio(static_cast<double>(ps.stored_bytes), static_cast<double>(ps.plane_bytes))},
                          {"order0_bound_bytes", bound},
                          {"order0_bound_ratio", ratio(bound, static_cast<double>(ps.plane_bytes))}});
        }
        jt.push_back(std::move(j));
    }
    doc["ratio"] = ratio(static_cast<double>(store->stored_size()), static_cast<double>(store->original_size()));
    doc["order0_bound_bytes"] = bound_total;
    doc["order0_bound_ratio"] = ratio(bound_total, static_cast<double>(store->original_size()));
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
    if (list_chunks) {
        auto& jc = doc["chunks"] = nlohmann::json::array();
        for (size_t i = 0; i < store->chunk_count(); ++i) {
            const ChunkEntry& e = store->chunk(i);
            std::vector<std::string> codecs;
            std::vector<uint32_t> lengths;
            for (unsigned p = 0; p < e.plane_count; ++p) {
                codecs.emplace_back(name(e.codec[p]));
                lengths.push_back(e.payload_length[p]);
            }
            jc.push_back({{"index", i}, {"tensor", tensors[e.tensor].name}, {"original_offset", e.original_offset},
                          {"original_length", e.original_length}, {"stored_offset", e.stored_offset},
                          {"stored_length", e.stored_length()}, {"decomposition", name(e.decomposition)},
                          {"codecs", codecs}, {"payload_lengths", lengths}});
        }
    }

    if (as_json) {
        // A display: a file or tensor name that is not UTF-8 (JSON holds
        // UTF-8 only) is shown with U+FFFD for each bad byte, not refused.
        std::printf("%s\n", doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        return kOk;
    }
    // The table is for a terminal: a name from the file (a hostile one may
    // hold ESC [ ... or a newline) is shown with its control characters and
    // bytes that are not UTF-8 as \xHH, never sent as they are.
    std::printf("%-40s %-8s %-16s %5s %-12s %12s %12s %7s %7s\n", "tensor", "dtype", "decomposition", "plane", "codecs",
                "plane bytes", "stored", "ratio", "bound");
    for (const auto& t : doc["tensors"]) {
        const std::string shown = printable(t["name"].get<std::string>());
        bool first = true;
        for (const auto& p : t["planes"]) {
            std::string codecs;
            for (const auto& [c, n] : p["codecs"].items()) codecs += (codecs.empty() ? "" : ",") + c;
            std::printf("%-40.40s %-8s %-16s %5d %-12s %12llu %12llu %7.4f %7.4f\n",
                        first ? shown.c_str() : "", first ? t["dtype"].get<std::string>().c_str() : "",
                        first ? t["decomposition"].get<std::string>().c_str() : "", p["plane"].get<int>(), codecs.c_str(),
                        p["plane_bytes"].get<unsigned long long>(), p["stored_bytes"].get<unsigned long long>(),
                        p["ratio"].get<double>(), p["order0_bound_ratio"].get<double>());
            first = false;
        }
        if (first)  // an empty tensor: no planes, but a row, as --json lists it
            std::printf("%-40.40s %-8s %-16s %5s %-12s %12d %12d %7s %7s\n", shown.c_str(),
                        t["dtype"].get<std::string>().c_str(), t["decomposition"].get<std::string>().c_str(), "-", "-", 0,
                        0, "-", "-");
    }
    std::printf("\n%s: %llu -> %llu bytes, ratio %.4f; order-0 per-plane bound %.4f (header %llu bytes)\n", printable(path).c_str(),
                static_cast<unsigned long long>(store->original_size()), static_cast<unsigned long long>(store->stored_size()),
                doc["ratio"].get<double>(), doc["order0_bound_ratio"].get<double>(),
                static_cast<unsigned long long>(store->prefix().size()));
    for (const auto& [key, label] : {std::pair{"fp4_blocks", "fp4 blocks"}, std::pair{"block_scales", "block scales"}})
        if (doc.contains(key)) {
            const auto& r = doc[key];
            std::printf("  %-13s %4zu tensors: %llu -> %llu bytes, ratio %.4f; order-0 per-plane bound %.4f\n",
                        label, r["tensors"].get<size_t>(),
                        r["original_bytes"].get<unsigned long long>(), r["stored_bytes"].get<unsigned long long>(),
                        r["ratio"].get<double>(),
                        r["order0_bound_ratio"].get<double>());
        }
    if (list_chunks)
        for (const auto& c : doc["chunks"])
            std::printf("chunk %llu %s original %llu+%u stored %llu+%llu\n", c["index"].get<unsigned long long>(),
                        printable(c["tensor"].get<std::string>()).c_str(), c["original_offset"].get<unsigned long long>(),
                        c["original_length"].get<unsigned>(), c["stored_offset"].get<unsigned long long>(),
                        c["stored_length"].get<unsigned long long>());
    return kOk;
}

}  // namespace ptwm::tool
