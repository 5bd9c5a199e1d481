// libFuzzer target: every plane codec's decoder and the chunk pipeline.
//
// Input layout (gen_seeds.cpp writes seeds in it):
//   byte  0       decomposition id (an unknown one means stream: see below)
//   bytes 1..4    original length, LE u32 (bounded, rounded to whole elements)
//   bytes 5..12   codec id per plane, raw bytes (unknown ids included)
//   bytes 13..26  payload length of planes 0..6, LE u16 each (the last plane
//                 gets what is left)
//   byte  27      f8-tables' and fp4-tables' decoders, mod 4: 0 the CPU's
//                 best, 1 AVX2 with vpgatherdd, 2 AVX2 with scalar loads,
//                 3 scalar (other codecs ignore it)
//   byte  28      the tensor layout the context models (codecs 6-8) and
//                 f8-tables see: bits 0-2 a shape from kShapes (0: none),
//                 bits 3-4 the chunk's offset in the tensor from kOffsets,
//                 bits 5-7 added to the chunk entry's group base (grouped
//                 decompositions; 0: the one the encoder would write)
//   bytes 29..    the payload: the planes' coded bytes back to back, then,
//                 when the input needs block scales (FP4 model, grouped
//                 decompositions 10-12), one scale a block at its end
// Shorter inputs only go through decode_plane, without a layout.
//
// decode_plane must fill the output or throw CorruptData; decode_chunk_payload
// the same. ptwm::Error of another kind, or any crash, is a finding.
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "codecs/f8_tables.hpp"
#include "codecs/fp4_tables.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/codecs/codec.hpp"
#include "ptwm/planes/fp4_groups.hpp"
#include "ptwm/store/chunk_codec.hpp"

namespace {

constexpr size_t kHeader = 29;
// Output sizes stay small enough that a run does not spend its time in
// memset or in decoders that read zeros past a short payload's end: every
// decoder's loop is the same for each element, so a few KiB reach all of it.
// (At 128 KiB, the context models -- 1-10 MB/s under the sanitizers -- were
// most of the time per input: the target ran some 100 inputs a second.)
constexpr uint32_t kMaxOriginal = 1u << 14;
// The static coders switch to their 32-state layout from 4 KiB: one size
// above that. The adaptive coders (5-8) gain nothing from it.
constexpr size_t kLarge = 4099;
// The adaptive coders decode 100x slower than the static ones (the FP8
// model at 3 MB/s under the sanitizers: 16 KiB took 5 ms, most of an
// input's time), and without a layout every element takes the same path:
// they are asked for at most this much, in a plane and in a chunk.
constexpr uint32_t kMaxAdaptive = 1u << 10;

// Shapes the context models take their contexts from: none, 1-D, 2-D,
// 4-D HWIO kernels (the FP8 model's kernel-position contexts), a column
// vector. Without one they decode with row length 1 and never reach their
// row and channel contexts.
constexpr uint64_t kShape1[] = {64}, kShape2[] = {16, 64}, kShape3[] = {3, 3, 8, 16}, kShape4[] = {40, 64},
                   kShape5[] = {128, 1}, kShape6[] = {2, 2048}, kShape7[] = {1, 1, 32, 64};
constexpr std::span<const uint64_t> kShapes[8] = {{}, kShape1, kShape2, kShape3, kShape4, kShape5, kShape6, kShape7};
// The chunk's first byte in its tensor: the start, and later chunks.
constexpr uint64_t kOffsets[4] = {0, 16, 4096, 1u << 16};
// Bytes an FP4 block (MXFP4: 32 values) takes: the FP4 model's unit.
constexpr size_t kFp4Block = 16;

bool is_adaptive(ptwm::Codec c) { return c == ptwm::Codec::adaptive || ptwm::is_context_model(c); }

uint32_t load_u32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }
uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

// The last `count` bytes of the payload as block scales, the rest as the
// coded planes; a payload shorter than that lends its bytes round and round.
struct WithScales {
    std::span<const uint8_t> coded;
    std::vector<uint8_t> scales;
};
WithScales take_scales(std::span<const uint8_t> payload, size_t count) {
    WithScales w{payload, std::vector<uint8_t>(count)};
    if (count == 0 || payload.empty()) return w;
    if (count < payload.size()) {
        w.coded = payload.first(payload.size() - count);
        std::copy(payload.end() - static_cast<std::ptrdiff_t>(count), payload.end(), w.scales.begin());
    } else {
        for (size_t i = 0; i < count; ++i) w.scales[i] = payload[i % payload.size()];
    }
    return w;
}

void try_plane(ptwm::Codec c, std::span<const uint8_t> payload, size_t n, ptwm::TensorLayout layout) {
    // The FP4 model decodes whole blocks, one scale each; fp4-tables too,
    // of the size its first byte names (1: NVFP4's 8 bytes, else MXFP4's 16).
    size_t block = 0;
    if (c == ptwm::Codec::fp4_model) block = kFp4Block;
    if (c == ptwm::Codec::fp4_tables) block = !payload.empty() && payload[0] == 1 ? kFp4Block / 2 : kFp4Block;
    if (block) n -= n % block;
    if (n == 0) return;
    const WithScales w = take_scales(payload, block ? n / block : 0);
    layout.scales = w.scales;
    std::vector<uint8_t> out(n);
    try {
        ptwm::decode_plane(c, w.coded, out, layout);
    } catch (const ptwm::CorruptData&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> input(data, size);
    const std::span<const uint8_t> payload = size >= kHeader ? input.subspan(kHeader) : input;
    const uint32_t wanted = size >= kHeader ? load_u32(data + 1) % kMaxOriginal : 0;
    const uint8_t where = size >= kHeader ? data[28] : 0;
    ptwm::TensorLayout layout;
    layout.shape = kShapes[where & 7];
    layout.offset = kOffsets[where >> 3 & 3];

    // The codec the input names for its first plane (byte 5; the first byte
    // of a shorter input), ids past the format's included, asked for a few
    // lengths: the exact one the header names, tiny ones (a payload claiming
    // more must not write past them) and a larger one. Zero is left out: no
    // caller asks for an empty plane (chunks are never empty).
    // One codec an input, not every codec on every input: that made each
    // input cost some 50 decodes, the FP8 context model's alone a third of
    // the time, and the target ran about 600 inputs a second. The fuzzer
    // reaches the other codecs by mutating the id byte; the seeds name
    // theirs. kCodecIds covers the ids defined now and those a later
    // version may add, so their decoders are fuzzed the day they exist.
    constexpr unsigned kCodecIds = 16;
    if (size > 0) {
        const auto c = static_cast<ptwm::Codec>((size >= kHeader ? data[5] : data[0]) % kCodecIds);
        const bool adaptive = is_adaptive(c);
        // f8-tables' state-signs layout and fp4-tables' wide layout decode
        // with AVX-512, AVX2 or neither, whichever the CPU has, and AVX2's
        // lookups by vpgatherdd or scalar loads, whichever is faster on it;
        // byte 27 picks one of the others (one path an input: each call
        // reads and normalises all its tables again, which was most of an
        // f8-tables input's time).
        const unsigned simd_path = size >= kHeader ? data[27] % 4u : 0;
        ptwm::f8tables::allow_avx512(simd_path == 0);
        ptwm::f8tables::allow_simd(simd_path <= 2);
        ptwm::fp4tables::allow_avx512(simd_path == 0);
        ptwm::fp4tables::allow_simd(simd_path <= 2);
        ptwm::f8tables::force_gather_lanes(simd_path == 1 ? 8 : simd_path == 2 ? 1 : 0);  // (fp4-tables' too)
        for (size_t n : {size_t{1}, size_t{3}, size_t{64}, adaptive ? size_t{0} : kLarge,
                         size_t{adaptive ? wanted % kMaxAdaptive : wanted}})
            if (n) try_plane(c, payload, n, layout);

        ptwm::f8tables::allow_avx512(true);
        ptwm::f8tables::allow_simd(true);
    }

    if (size < kHeader) return 0;

    // A chunk entry as StoreReader::open lets one through: a known
    // decomposition with its own plane count and a length of whole elements.
    // decode_chunk_payload trusts those three (see the report on the fuzz
    // work); codecs, payload lengths and checksum are left to the input.
    ptwm::ChunkEntry e;
    e.decomposition = static_cast<ptwm::Decomposition>(data[0]);
    if (!ptwm::is_known(e.decomposition)) e.decomposition = ptwm::Decomposition::stream;
    e.plane_count = static_cast<uint8_t>(ptwm::plane_count(e.decomposition));
    const unsigned unit = ptwm::element_bytes(e.decomposition);
    for (unsigned p = 0; p < ptwm::kMaxPlanes; ++p) e.codec[p] = static_cast<ptwm::Codec>(data[5 + p]);
    bool adaptive = false;
    for (unsigned p = 0; p < e.plane_count; ++p) adaptive = adaptive || is_adaptive(e.codec[p]);
    const uint32_t length = adaptive ? wanted % kMaxAdaptive : wanted;
    e.original_length = std::max(unit, length - length % unit);
    // Grouped decompositions: the chunk's block scales from the payload's end,
    // and a group base the input may shift off the one they give.
    const size_t block = ptwm::is_grouped(e.decomposition) ? ptwm::block_bytes(e.decomposition) : 0;
    const WithScales w = take_scales(payload, block ? e.original_length / block : 0);
    if (block) e.group_base = static_cast<uint8_t>(ptwm::group_base(e.decomposition, w.scales) + (where >> 5));
    size_t left = w.coded.size();
    for (unsigned p = 0; p < e.plane_count; ++p) {
        const size_t len = p + 1 == e.plane_count ? left : std::min<size_t>(left, load_u16(data + 13 + 2 * p));
        e.payload_length[p] = static_cast<uint32_t>(len);
        left -= len;
    }
    // The checksum of the first decodable guess would need the decoded bytes;
    // a mismatch is as good an ending as a match, both run the whole pipeline.
    e.checksum = 0;
    std::vector<uint8_t> out(e.original_length);
    try {
        ptwm::decode_chunk_payload(e, w.coded.first(w.coded.size() - left), out, w.scales, layout);
    } catch (const ptwm::CorruptData&) {
    }
    return 0;
}
