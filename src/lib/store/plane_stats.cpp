#include "ptwm/store/plane_stats.hpp"

#include <algorithm>

#include "ptwm/store/chunk_codec.hpp"

namespace ptwm {

std::vector<TensorStats> collect_plane_stats(const StoreReader& store,
                                            const std::function<void(uint64_t, uint64_t)>& progress) {
    std::vector<TensorStats> stats(store.header().tensors.size());
    std::vector<uint8_t> bytes;
    // The histograms of the tensor being decoded. Its chunks come one after
    // another (the reader checks at open that chunks tile the data section
    // in offset order, each inside its tensor, and tensors are in offset
    // order), so its bounds are taken when the next tensor's chunks start.
    uint32_t current = kNoTensor;
    Histogram whole{};
    std::vector<Histogram> planes;
    const auto take_bounds = [&] {
        if (current == kNoTensor) return;
        TensorStats& t = stats[current];
        t.whole_order0_bits = order0_bits(whole);
        whole.fill(0);
        for (size_t p = 0; p < t.planes.size(); ++p) {
            t.planes[p].order0_bits = order0_bits(planes[p]);
            planes[p].fill(0);
        }
    };
    for (size_t i = 0; i < store.chunk_count(); ++i) {
        const ChunkEntry& e = store.chunk(i);
        if (e.tensor != current) {
            take_bounds();
            current = e.tensor;
        }
        TensorStats& t = stats[e.tensor];
        if (t.decomposition.empty()) t.decomposition = std::string(name(e.decomposition));
        t.original_bytes += e.original_length;
        t.stored_bytes += e.stored_length();
        if (t.planes.size() < e.plane_count) t.planes.resize(e.plane_count);
        if (planes.size() < e.plane_count) planes.resize(e.plane_count);
        bytes.resize(e.original_length);
        store.decode_chunk(i, bytes);
        add_to_histogram(bytes, whole);
        const auto chunk = chunk_planes(e, bytes, store.chunk_scales(i));
        for (unsigned p = 0; p < e.plane_count; ++p) {
            PlaneStats& ps = t.planes[p];
            ps.plane_bytes += chunk[p].size();
            ps.stored_bytes += e.payload_length[p];
            const auto used = std::find_if(ps.codecs.begin(), ps.codecs.end(),
                                           [&](const auto& c) { return c.first == e.codec[p]; });
            if (used == ps.codecs.end()) ps.codecs.emplace_back(e.codec[p], 1);
            else ++used->second;
            add_to_histogram(chunk[p], planes[p]);
        }
        if (progress) progress(e.original_offset + e.original_length, store.original_size());
    }
    take_bounds();
    return stats;
}

}  // namespace ptwm
