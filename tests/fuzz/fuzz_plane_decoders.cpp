// libFuzzer target: every plane codec's decoder and the chunk pipeline.
//
// Input layout (gen_seeds.cpp writes seeds in it):
//   byte  0       decomposition id (an unknown one means stream: see below)
//   bytes 1..4    original length, LE u32 (bounded, rounded to whole elements)
//   bytes 5..12   codec id per plane, raw bytes (unknown ids included)
//   bytes 13..26  payload length of planes 0..6, LE u16 each (the last plane
//                 gets what is left)
//   byte  27      f8-tables' decoder: 0 the CPU's best, 1 AVX2 (no AVX-512),
//                 2 and up scalar (other codecs ignore it)
//   byte  28      reserved (zero)
//   bytes 29..    the payload: the planes' coded bytes back to back
// Shorter inputs only go through decode_plane.
//
// decode_plane must fill the output or throw CorruptData; decode_chunk_payload
// the same. ptwm::Error of another kind, or any crash, is a finding.
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "codecs/f8_tables.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/codecs/codec.hpp"
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

bool is_adaptive(ptwm::Codec c) { return c == ptwm::Codec::adaptive || ptwm::is_context_model(c); }

uint32_t load_u32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }
uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

void try_plane(ptwm::Codec c, std::span<const uint8_t> payload, size_t n) {
    std::vector<uint8_t> out(n);
    try {
        ptwm::decode_plane(c, payload, out);
    } catch (const ptwm::CorruptData&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> input(data, size);
    const std::span<const uint8_t> payload = size >= kHeader ? input.subspan(kHeader) : input;
    const uint32_t wanted = size >= kHeader ? load_u32(data + 1) % kMaxOriginal : 0;

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
        // f8-tables decodes its state-signs layout with AVX-512, AVX2 or
        // neither, whichever the CPU has; byte 27 picks one of the others
        // (one path an input: each call reads and normalises all its
        // tables again, which was most of an f8-tables input's time).
        const uint8_t f8_path = size >= kHeader ? data[27] : 0;
        ptwm::f8tables::allow_avx512(f8_path == 0);
        ptwm::f8tables::allow_simd(f8_path <= 1);
        for (size_t n : {size_t{1}, size_t{3}, size_t{64}, adaptive ? size_t{0} : kLarge,
                         size_t{adaptive ? wanted % kMaxAdaptive : wanted}})
            if (n) try_plane(c, payload, n);

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
    size_t left = payload.size();
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
        ptwm::decode_chunk_payload(e, payload.first(payload.size() - left), out);
    } catch (const ptwm::CorruptData&) {
    }
    return 0;
}
