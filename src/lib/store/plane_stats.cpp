#include "ptwm/store/plane_stats.hpp"

#include "ptwm/store/chunk_codec.hpp"

namespace ptwm {

std::vector<TensorStats> collect_plane_stats(const StoreReader& store,
                                            const std::function<void(uint64_t, uint64_t)>& progress) {
    std::vector<TensorStats> stats(store.header().tensors.size());
    std::vector<uint8_t> bytes;
    for (size_t i = 0; i < store.chunk_count(); ++i) {
        const ChunkEntry& e = store.chunk(i);
        TensorStats& t = stats[e.tensor];
        if (t.decomposition.empty()) t.decomposition = std::string(name(e.decomposition));
        t.original_bytes += e.original_length;
        t.stored_bytes += e.stored_length();
        if (t.planes.size() < e.plane_count) t.planes.resize(e.plane_count);
        bytes.resize(e.original_length);
        store.decode_chunk(i, bytes);
        add_to_histogram(bytes, t.whole);
        const auto planes = chunk_planes(e, bytes, store.chunk_scales(i));
        for (unsigned p = 0; p < e.plane_count; ++p) {
            PlaneStats& ps = t.planes[p];
            ps.plane_bytes += planes[p].size();
            ps.stored_bytes += e.payload_length[p];
            ++ps.codecs[std::string(name(e.codec[p]))];
            add_to_histogram(planes[p], ps.histogram);
        }
        if (progress) progress(e.original_offset + e.original_length, store.original_size());
    }
    return stats;
}

}  // namespace ptwm
