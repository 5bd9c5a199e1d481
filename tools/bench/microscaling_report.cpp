#include "microscaling_report.hpp"

#include <zstd.h>

#include <algorithm>
#include <array>
#include <span>
#include <vector>

#include "ptwm/codecs/codec.hpp"
#include "ptwm/planes/fp4_groups.hpp"
#include "ptwm/store/plane_stats.hpp"
#include "ptwm/store/scale_pairs.hpp"

namespace bench {
namespace {

// The order-0 bound of the values dealt into one plane per scale group, as
// the grouped decompositions (10, 11) of earlier writers did: their nibble
// entropies per group, over the whole tensor (groups from its smallest scale
// context). fp4-tables codes the same groups in one plane, so the plane's
// own bound no longer shows what grouping alone would reach.
double group_planes_bound(std::span<const uint8_t> blocks, std::span<const uint8_t> scales) {
    if (scales.empty() || blocks.size() % scales.size() != 0) return 0;
    const size_t bb = blocks.size() / scales.size();
    if (bb != 8 && bb != 16) return 0;
    const auto d = bb == 8 ? ptwm::Decomposition::fp4_nv_grouped : ptwm::Decomposition::fp4_mx_grouped;
    std::array<ptwm::Histogram, ptwm::kMaxPlanes> per_group{};
    ptwm::add_group_byte_histograms(d, blocks, scales, ptwm::group_base(d, scales), per_group);
    double bits = 0;
    for (const auto& g : per_group) {
        ptwm::Histogram nibbles{};
        for (unsigned v = 0; v < 256; ++v) nibbles[v & 15] += g[v], nibbles[v >> 4] += g[v];
        bits += ptwm::order0_bits(nibbles);
    }
    return bits / 8;
}

}  // namespace

MicroscalingFigures measure_microscaling(const ptwm::StoreReader& store) {
    MicroscalingFigures f;
    const auto& tensors = store.header().tensors;
    std::vector<std::pair<uint32_t, uint32_t>> pairs;  // (blocks, scales)
    const auto found = ptwm::find_scale_pairs(store.header());
    for (uint32_t t = 0; t < tensors.size(); ++t)
        if (found[t]) pairs.emplace_back(t, found[t]->scale_tensor);
    f.pairs = pairs.size();
    if (pairs.empty()) return f;
    const std::vector<ptwm::TensorStats> stats = ptwm::collect_plane_stats(store);
    auto bound = [&](uint32_t t) {
        double b = 0;
        for (const auto& p : stats[t].planes) b += p.order0_bits / 8;
        return b;
    };
    std::vector<uint8_t> bytes, z, values;
    for (const auto& [blocks, scales] : pairs) {
        f.fp4_bytes += static_cast<double>(stats[blocks].original_bytes);
        f.fp4_stored += static_cast<double>(stats[blocks].stored_bytes);
        f.fp4_bound += bound(blocks);
        const auto& s = tensors[scales];
        f.scale_bytes += static_cast<double>(s.size());
        f.scale_stored += static_cast<double>(stats[scales].stored_bytes);
        f.scale_bound += bound(scales);
        bytes.resize(s.size());
        store.read(s.begin, bytes);
        values.resize(tensors[blocks].size());
        store.read(tensors[blocks].begin, values);
        f.fp4_group_bound += group_planes_bound(values, bytes);
        z.resize(ZSTD_compressBound(bytes.size()));
        const size_t r = ZSTD_compress(z.data(), z.size(), bytes.data(), bytes.size(), 19);
        f.scale_zstd19 += static_cast<double>(ZSTD_isError(r) ? bytes.size() : r);
    }
    return f;
}

void print_microscaling_report(const MicroscalingFigures& f, const std::string& label, std::FILE* out) {
    if (f.pairs == 0) return;
    auto r = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    std::fprintf(out, "%s: %zu FP4 tensors with block scales\n", label.c_str(), f.pairs);
    std::fprintf(out, "  block scales %10.0f bytes: ours %.4f, order-0 bound %.4f, zstd -19 per tensor %.4f  %s\n",
                 f.scale_bytes, r(f.scale_stored, f.scale_bytes), r(f.scale_bound, f.scale_bytes),
                 r(f.scale_zstd19, f.scale_bytes),
                 f.scale_stored <= std::min(f.scale_bound, f.scale_zstd19) ? "ok" : "ABOVE");
    std::fprintf(out, "  FP4 values   %10.0f bytes: ours %.4f, order-0 bound %.4f                        %s\n", f.fp4_bytes,
                 r(f.fp4_stored, f.fp4_bytes), r(f.fp4_bound, f.fp4_bytes), f.fp4_stored <= f.fp4_bound ? "ok" : "ABOVE");
    std::fprintf(out, "    (one plane per scale group, as stores before fp4-tables: order-0 bound %.4f)\n",
                 r(f.fp4_group_bound, f.fp4_bytes));
}

}  // namespace bench
