#include "ptwm/chunk_codec.hpp"

#include <xxhash.h>

#include <array>
#include <limits>

#include "ptwm/error.hpp"

namespace ptwm {
namespace {

// Per-thread plane buffers: a chunk is decoded on one thread from start to
// end, and reusing the buffers keeps allocation out of the read path.
struct PlaneScratch {
    std::array<std::vector<uint8_t>, kMaxPlanes> planes;
    std::span<uint8_t> plane(unsigned p, size_t n) {
        if (planes[p].size() < n) planes[p].resize(n);
        return {planes[p].data(), n};
    }
};
thread_local PlaneScratch t_scratch;

}  // namespace

uint64_t chunk_checksum(std::span<const uint8_t> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

EncodedChunk encode_chunk(std::span<const uint8_t> bytes, Decomposition d, const EncodeOptions& opt) {
    if (bytes.size() > std::numeric_limits<uint32_t>::max()) throw Error("chunk larger than 4 GiB");
    EncodedChunk out;
    ChunkEntry& e = out.entry;
    e.decomposition = d;
    e.plane_count = static_cast<uint8_t>(plane_count(d));
    e.original_length = static_cast<uint32_t>(bytes.size());
    e.checksum = chunk_checksum(bytes);

    std::array<uint8_t*, kMaxPlanes> planes{};
    for (unsigned p = 0; p < e.plane_count; ++p) planes[p] = t_scratch.plane(p, plane_length(d, bytes.size(), p)).data();
    split(d, bytes, std::span(planes.data(), e.plane_count));
    for (unsigned p = 0; p < e.plane_count; ++p) {
        auto coded = encode_plane({planes[p], plane_length(d, bytes.size(), p)}, opt);
        e.codec[p] = coded.codec;
        e.payload_length[p] = static_cast<uint32_t>(coded.payload.size());
        out.payload.insert(out.payload.end(), coded.payload.begin(), coded.payload.end());
    }
    return out;
}

void decode_chunk_payload(const ChunkEntry& e, std::span<const uint8_t> payload, std::span<uint8_t> out) {
    if (out.size() != e.original_length || payload.size() != e.stored_length())
        throw CorruptData("chunk buffer sizes disagree with the index");
    const Decomposition d = e.decomposition;
    std::array<const uint8_t*, kMaxPlanes> planes{};
    size_t at = 0;
    for (unsigned p = 0; p < e.plane_count; ++p) {
        const auto coded = payload.subspan(at, e.payload_length[p]);
        at += e.payload_length[p];
        const size_t n = plane_length(d, out.size(), p);
        if (e.codec[p] == Codec::raw && coded.size() == n) {
            planes[p] = coded.data();  // zero copy: merge reads the stored bytes
            continue;
        }
        const auto buf = t_scratch.plane(p, n);
        try {
            decode_plane(e.codec[p], coded, buf);
        } catch (const CorruptData& err) {
            throw CorruptData("plane " + std::to_string(p) + ": " + err.what());
        }
        planes[p] = buf.data();
    }
    merge(d, std::span(planes.data(), e.plane_count), out);
    if (chunk_checksum(out) != e.checksum) throw CorruptData("checksum mismatch: the decoded bytes are not the packed ones");
}

Decomposition choose_decomposition(std::span<const Decomposition> candidates, std::span<const uint8_t> sample) {
    Decomposition best = candidates.front();
    if (candidates.size() == 1) return best;
    double best_bits = std::numeric_limits<double>::infinity();
    for (Decomposition d : candidates) {
        const size_t n = sample.size() - sample.size() % element_bytes(d);
        double bits = 0;
        std::array<uint8_t*, kMaxPlanes> planes{};
        for (unsigned p = 0; p < plane_count(d); ++p) planes[p] = t_scratch.plane(p, plane_length(d, n, p)).data();
        split(d, sample.first(n), std::span(planes.data(), plane_count(d)));
        for (unsigned p = 0; p < plane_count(d); ++p) bits += order0_bits({planes[p], plane_length(d, n, p)});
        if (bits < best_bits) best_bits = bits, best = d;
    }
    return best;
}

}  // namespace ptwm
