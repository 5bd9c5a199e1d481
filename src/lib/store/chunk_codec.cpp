#include "ptwm/store/chunk_codec.hpp"


#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "ptwm/base/checksum.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/planes/fp4_groups.hpp"

namespace ptwm {
namespace {

// FP4 chunks of blocks below this size try the stream too (encode_chunk).
constexpr size_t kFp4StreamTryMax = 4096;

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

// The planes a chunk of `n` bytes splits into under `d`.
struct PlaneLayout {
    unsigned count;
    std::array<size_t, kMaxPlanes> length{};
};

PlaneLayout layout(Decomposition d, size_t n, std::span<const uint8_t> scales, uint8_t base) {
    PlaneLayout l{plane_count(d)};
    if (is_grouped(d)) {
        l.length = group_plane_lengths(d, scales, base);
    } else {
        for (unsigned p = 0; p < l.count; ++p) l.length[p] = plane_length(d, n, p);
    }
    return l;
}

// Split `bytes` into scratch planes; returns pointers to them.
std::array<uint8_t*, kMaxPlanes> split_to_scratch(Decomposition d, std::span<const uint8_t> bytes, const PlaneLayout& l,
                                                  std::span<const uint8_t> scales, uint8_t base) {
    std::array<uint8_t*, kMaxPlanes> planes{};
    for (unsigned p = 0; p < l.count; ++p) planes[p] = t_scratch.plane(p, l.length[p]).data();
    if (is_grouped(d))
        split_grouped(d, bytes, scales, base, std::span(planes.data(), l.count));
    else
        split(d, bytes, std::span(planes.data(), l.count));
    return planes;
}

}  // namespace

void release_plane_buffers(size_t keep_bytes) {
    for (auto& plane : t_scratch.planes)
        if (plane.capacity() > keep_bytes) std::vector<uint8_t>().swap(plane);
}

uint64_t chunk_checksum(std::span<const uint8_t> bytes) { return xxh3(bytes.data(), bytes.size()); }

TensorLayout tensor_layout(const TensorInfo& t, uint64_t chunk_offset, bool block_scales) {
    return {t.shape, chunk_offset - t.begin, t.dtype, {}, block_scales};
}

EncodedChunk encode_chunk(std::span<const uint8_t> bytes, Decomposition d, const EncodeOptions& opt,
                          std::span<const uint8_t> scales, const TensorLayout& where) {
    if (bytes.size() > std::numeric_limits<uint32_t>::max()) throw Error("chunk larger than 4 GiB");
    if (is_grouped(d) && scales.size() * block_bytes(d) != bytes.size())
        throw Error("a grouped FP4 chunk needs one scale per block");
    if (d == Decomposition::fp4_mx_modelled && bytes.size() > kMaxModelledChunkBytes)
        throw Error("a chunk over " + std::to_string(kMaxModelledChunkBytes) + " bytes cannot take the FP4 context model");
    EncodedChunk out;
    ChunkEntry& e = out.entry;
    e.decomposition = d;
    e.plane_count = static_cast<uint8_t>(plane_count(d));
    e.original_length = static_cast<uint32_t>(bytes.size());
    e.checksum = chunk_checksum(bytes);
    if (is_grouped(d)) e.group_base = group_base(d, scales);

    const PlaneLayout l = layout(d, bytes.size(), scales, e.group_base);
    // The decompositions that keep the blocks code `bytes` itself: no plane to copy it into.
    const auto planes = keeps_blocks(d) ? std::array<uint8_t*, kMaxPlanes>{} : split_to_scratch(d, bytes, l, scales, e.group_base);
    TensorLayout with_scales = where;
    with_scales.scales = scales;
    // At most the raw bytes plus a little per plane: no regrowth (and copy)
    // of the payload as planes are appended. A single plane's payload
    // becomes the chunk's as it is (FP8 and FP4-tabled chunks), not a copy
    // in a second buffer of the chunk's size (with the row classes below,
    // 5% of posenet per-channel FP8's page faults).
    if (l.count > 1) out.payload.reserve(bytes.size() + 64 * l.count);
    EncodeOptions plane_opt = opt;
    for (unsigned p = 0; p < l.count; ++p) {
        // The decompositions that keep the blocks exist for their one codec.
        auto coded = d == Decomposition::fp4_mx_modelled
                         ? EncodedPlane{Codec::fp4_model, encode_with(Codec::fp4_model, bytes, 0, with_scales)}
                     : keeps_blocks(d)
                         ? EncodedPlane{Codec::fp4_tables, encode_with(Codec::fp4_tables, bytes, 0, with_scales)}
                         : encode_plane({planes[p], l.length[p]}, plane_opt, d == Decomposition::stream ? &where : nullptr);
        // A chunk's FP4 group planes hold the same kind of values (nibbles
        // of blocks alike but for their scale): where the first had no use
        // for zstd, the others are not sampled for it. (A thousand 4 KiB
        // samples were a tenth of an MXFP4 file's pack time.)
        if (is_grouped(d) && p == 0 && coded.codec != Codec::zstd) plane_opt.zstd = false;
        e.codec[p] = coded.codec;
        e.payload_length[p] = static_cast<uint32_t>(coded.payload.size());
        if (l.count == 1) out.payload = std::move(coded.payload);
        else out.payload.insert(out.payload.end(), coded.payload.begin(), coded.payload.end());
    }
    // The FP8 context model codes whole bytes, so at the levels that try it
    // the whole-byte decomposition competes too: the plan chose between the
    // decompositions by their order-0 bounds, which cannot see the model's gain.
    if (where.dtype == DType::F8_E4M3 && d != Decomposition::stream && opt.level >= kContextModelLevel) {
        EncodedChunk whole = encode_chunk(bytes, Decomposition::stream, opt, {}, where);
        if (whole.payload.size() < out.payload.size()) return whole;
    }
    // FP4 chunks of blocks take fp4-tables (the writer does not sample
    // them); a small one is also coded as a stream, and the smaller kept:
    // its tables and states weigh most there, and constant blocks or
    // repeated rows (a strided slice's blocks, a constant folded into FP4)
    // code to a few bytes as a stream, to 23-900 under the tables. From 4 KiB
    // (the wide layout) the stream never won on the corpus's and derived
    // FP4 files, and trying it there cost as much as the choice did.
    if ((d == Decomposition::fp4_mx_tabled || d == Decomposition::fp4_nv_tabled) && bytes.size() < kFp4StreamTryMax) {
        EncodedChunk whole = encode_chunk(bytes, Decomposition::stream, opt, {}, where);
        if (whole.payload.size() < out.payload.size()) return whole;
    }
    // Likewise MXFP4 blocks against the FP4 context model.
    if ((d == Decomposition::fp4_mx_grouped || d == Decomposition::fp4_mx_tabled) && opt.level >= kContextModelLevel &&
        bytes.size() <= kMaxModelledChunkBytes) {
        EncodedChunk modelled = encode_chunk(bytes, Decomposition::fp4_mx_modelled, opt, scales, where);
        if (modelled.payload.size() < out.payload.size()) return modelled;
    }
    return out;
}

void decode_chunk_payload(const ChunkEntry& e, std::span<const uint8_t> payload, std::span<uint8_t> out,
                          std::span<const uint8_t> scales, const TensorLayout& where) {
    if (out.size() != e.original_length || payload.size() != e.stored_length())
        throw CorruptData("chunk buffer sizes disagree with the index");
    const Decomposition d = e.decomposition;
    // StoreReader::open validates entries; this keeps a caller that did not
    // from indexing past the plane tables.
    if (!is_known(d) || e.plane_count != plane_count(d) || out.size() % element_bytes(d) != 0)
        throw CorruptData("chunk entry does not fit its decomposition");
    if (is_grouped(d) && scales.size() * block_bytes(d) != out.size())
        throw CorruptData("the paired scales do not cover the chunk's blocks");
    const PlaneLayout l = layout(d, out.size(), scales, e.group_base);
    TensorLayout with_scales = where;
    with_scales.scales = scales;
    std::array<const uint8_t*, kMaxPlanes> planes{};
    size_t at = 0;
    for (unsigned p = 0; p < e.plane_count; ++p) {
        const auto coded = payload.subspan(at, e.payload_length[p]);
        at += e.payload_length[p];
        const size_t n = l.length[p];
        if (e.codec[p] == Codec::raw && coded.size() == n) {
            planes[p] = coded.data();  // zero copy: merge reads the stored bytes
            continue;
        }
        // A chunk of one plane as it is (whole FP8 bytes, integers, FP4
        // blocks for their codecs) decodes straight into `out`: through a
        // plane buffer it was one more copy of every byte.
        const bool in_place = d == Decomposition::stream || keeps_blocks(d);
        const auto buf = in_place ? out : t_scratch.plane(p, n);
        try {
            decode_plane(e.codec[p], coded, buf, with_scales);
        } catch (const CorruptData& err) {
            throw CorruptData("plane " + std::to_string(p) + ": " + err.what());
        }
        planes[p] = buf.data();
    }
    if (planes[0] != out.data()) {  // else a one-plane chunk decoded in place: nothing to merge
        if (is_grouped(d))
            merge_grouped(d, std::span(planes.data(), e.plane_count), scales, e.group_base, out);
        else
            merge(d, std::span(planes.data(), e.plane_count), out);
    }
    if (chunk_checksum(out) != e.checksum) throw CorruptData("checksum mismatch: the decoded bytes are not the packed ones");
}

std::vector<std::vector<uint8_t>> chunk_planes(const ChunkEntry& e, std::span<const uint8_t> bytes,
                                               std::span<const uint8_t> scales) {
    const PlaneLayout l = layout(e.decomposition, bytes.size(), scales, e.group_base);
    const auto planes = split_to_scratch(e.decomposition, bytes, l, scales, e.group_base);
    std::vector<std::vector<uint8_t>> out(l.count);
    for (unsigned p = 0; p < l.count; ++p) out[p].assign(planes[p], planes[p] + l.length[p]);
    return out;
}

namespace {

// The order-0 bits of the planes of `bytes` under `d`, summed over the
// planes in their order.
double plane_bits(Decomposition d, std::span<const uint8_t> bytes) {
    if (d == Decomposition::stream) return order0_bits(bytes);
    const PlaneLayout l = layout(d, bytes.size(), {}, 0);
    const auto planes = split_to_scratch(d, bytes, l, {}, 0);
    double bits = 0;
    for (unsigned p = 0; p < l.count; ++p) bits += order0_bits({planes[p], l.length[p]});
    return bits;
}

}  // namespace

std::vector<Decomposition> viable_candidates(std::span<const Decomposition> candidates) {
    // A byte's order-0 entropy is never above the sum of its two nibbles'
    // (after any per-byte bit reorder).
    const bool has_stream = std::find(candidates.begin(), candidates.end(), Decomposition::stream) != candidates.end();
    std::vector<Decomposition> out;
    for (Decomposition d : candidates)
        if (!has_stream || !(d == Decomposition::nibble_split || d == Decomposition::f8e4m3_exponent ||
                             d == Decomposition::f8e5m2_exponent))
            out.push_back(d);
    return out;
}

Decomposition choose_decomposition(std::span<const Decomposition> all, std::span<const uint8_t> sample) {
    const std::vector<Decomposition> candidates = viable_candidates(all);
    if (candidates.size() == 1) return candidates.front();
    Decomposition best = candidates.front();
    double best_bits = std::numeric_limits<double>::infinity();
    for (Decomposition d : candidates) {
        const size_t n = sample.size() - sample.size() % element_bytes(d);
        const double bits =
            plane_bits(d, sample.first(n)) * static_cast<double>(sample.size()) / static_cast<double>(std::max<size_t>(n, 1));
        if (bits < best_bits) best_bits = bits, best = d;
    }
    return best;
}

}  // namespace ptwm
