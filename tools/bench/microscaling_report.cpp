#include "microscaling_report.hpp"

#include <zstd.h>

#include <algorithm>
#include <vector>

#include "ptwm/codecs/codec.hpp"
#include "ptwm/store/plane_stats.hpp"
#include "ptwm/store/scale_pairs.hpp"

namespace bench {

MicroscalingFigures measure_microscaling(const ptwm::StoreReader& store) {
    MicroscalingFigures f;
    const auto& tensors = store.header().tensors;
    std::vector<std::pair<uint32_t, uint32_t>> pairs;  // (blocks, scales)
    for (uint32_t t = 0; t < tensors.size(); ++t)
        if (const auto pair = ptwm::find_scale_pair(store.header(), t)) pairs.emplace_back(t, pair->scale_tensor);
    f.pairs = pairs.size();
    if (pairs.empty()) return f;
    const std::vector<ptwm::TensorStats> stats = ptwm::collect_plane_stats(store);
    auto bound = [&](uint32_t t) {
        double b = 0;
        for (const auto& p : stats[t].planes) b += ptwm::order0_bits(p.histogram) / 8;
        return b;
    };
    std::vector<uint8_t> bytes, z;
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
}

}  // namespace bench
