// fp4-tables (codec 10, decompositions 13 and 14): MXFP4 / NVFP4 blocks as
// one stream under tables picked by their scales. Every byte comes back,
// values whose spread follows their scale code below their order-0 bound,
// and damaged payloads or mismatched scales are errors, not wrong bytes.
#include <gtest/gtest.h>

#include <random>

#include "codecs/fp4_tables.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/codecs/codec.hpp"
#include "ptwm/store/chunk_codec.hpp"

namespace ptwm {
namespace {

struct Blocks {
    std::vector<uint8_t> blocks, scales;
};

// Per block a scale and E2M1 nibbles whose spread depends on it, as in
// quantised weights: MX scales are E8M0 bytes, NV scales E4M3 bytes whose
// exponent (bits 3-6) carries the magnitude.
Blocks make_blocks(fp4tables::Kind kind, size_t nblocks, uint32_t seed) {
    std::mt19937 rng(seed);
    Blocks m;
    const unsigned bb = fp4tables::block_bytes(kind);
    for (size_t b = 0; b < nblocks; ++b) {
        const unsigned level = rng() % 5;
        m.scales.push_back(kind == fp4tables::Kind::mx ? static_cast<uint8_t>(118 + level)
                                                        : static_cast<uint8_t>((6 + level) << 3 | (rng() & 7)));
        for (unsigned k = 0; k < bb; ++k) {
            auto nibble = [&] {
                const double spread = 2.5 - 0.5 * level;
                const unsigned mag = std::min(7u, static_cast<unsigned>(std::abs(std::normal_distribution<double>(0, spread)(rng))));
                return static_cast<uint8_t>(mag | ((rng() & 1) << 3));
            };
            m.blocks.push_back(static_cast<uint8_t>(nibble() | (nibble() << 4)));
        }
    }
    return m;
}

constexpr fp4tables::Kind kKinds[] = {fp4tables::Kind::mx, fp4tables::Kind::nv};

// The decoders a test runs the wide layout through, whichever the CPU has:
// 2 the best SIMD (AVX-512 with the tables in registers), 1 the best SIMD
// gathering from the slot tables, 3 and 4 AVX2 with vpgatherdd and with
// scalar loads, 0 none.
constexpr int kDecoders[] = {2, 1, 3, 4, 0};
void use_decoder(int mode) {
    fp4tables::allow_simd(mode > 0);
    if (mode >= 3) fp4tables::allow_avx512(false);
    fp4tables::allow_lane_tables(mode == 2);
    fp4tables::force_gather_lanes(mode == 3 ? 8 : mode == 4 ? 1 : 0);
}
// Back to the best the CPU has.
void use_best_decoder() {
    fp4tables::allow_simd(true);
    fp4tables::allow_lane_tables(true);
    fp4tables::force_gather_lanes(0);
}

TEST(Fp4Tables, RoundTripsAnyBlockCount) {
    for (auto kind : kKinds)
        for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{333}, size_t{20000}}) {
            const Blocks m = make_blocks(kind, n, static_cast<uint32_t>(n + 1));
            const auto payload = fp4tables::encode(m.blocks, m.scales, kind);
            std::vector<uint8_t> out(m.blocks.size(), 0xAA);
            fp4tables::decode(payload, out, m.scales);
            EXPECT_EQ(out, m.blocks) << n << " blocks, kind " << static_cast<int>(kind);
        }
}

// Stores written before packed final states (four bytes a state, the wide
// states from 2^30) still decode; the packed ones are smaller.
TEST(Fp4Tables, StreamsWithFourByteStatesStillDecode) {
    for (auto kind : kKinds)
        for (size_t n : {size_t{100}, size_t{1000}, size_t{9000}}) {  // 4 states, wide, split
            const Blocks m = make_blocks(kind, n, static_cast<uint32_t>(n + 7));
            fp4tables::write_packed_states(false);
            const auto words = fp4tables::encode(m.blocks, m.scales, kind);
            fp4tables::write_packed_states(true);
            const auto packed = fp4tables::encode(m.blocks, m.scales, kind);
            const std::string what = std::to_string(n) + " blocks, kind " + std::to_string(static_cast<int>(kind));
            const unsigned layout = m.blocks.size() >= 32768 ? 2 | 4 : m.blocks.size() >= 4096 ? 2 : 0;  // wide, split
            EXPECT_EQ(words[0] & 14, layout) << what;
            EXPECT_EQ(packed[0] & 14, layout | 8) << what;
            EXPECT_LT(packed.size(), words.size()) << what;
            for (const auto* payload : {&words, &packed})
                for (int mode : kDecoders) {
                    use_decoder(mode);
                    std::vector<uint8_t> out(m.blocks.size(), 0xAA);
                    fp4tables::decode(*payload, out, m.scales);
                    EXPECT_EQ(out, m.blocks) << what << ", mode " << mode;
                }
            use_best_decoder();
        }
}

// From 4 KiB of blocks the stream has 32 states that start from the last
// 224 values; AVX-512 and AVX2 code and decode them 32 values at a time
// and other CPUs one by one. All must write the same bytes and give every
// byte back, whole rounds or not.
// From 32 KiB the blocks are two such streams (here, with split_from, also
// from 4 KiB, and four or three), each over a part of the blocks, which the
// SIMD decoder steps together: the same again.
TEST(Fp4Tables, WideLayoutRoundTripsWithAndWithoutSimd) {
    for (const auto& [split_min, streams] : {std::pair{size_t{0}, 2u}, std::pair{size_t{4096}, 4u}, std::pair{size_t{4096}, 3u}})
    for (auto kind : kKinds)
        for (size_t n : {size_t{257}, size_t{513}, size_t{1001}, size_t{4099}, size_t{8193}}) {
            const Blocks m = make_blocks(kind, n, static_cast<uint32_t>(n));
            if (m.blocks.size() < 4096) continue;
            fp4tables::split_from(split_min, streams);
            const auto payload = fp4tables::encode(m.blocks, m.scales, kind);
            const size_t from = split_min ? split_min : 32768;
            ASSERT_EQ(payload[0] & 2, 2) << "the wide layout from 4 KiB";
            ASSERT_EQ(payload[0] & 4, m.blocks.size() >= from ? 4 : 0) << "the split layout";
            // The SIMD encoders (AVX-512, AVX2) write the bytes the
            // value-by-value one does.
            fp4tables::allow_avx512(false);
            EXPECT_EQ(fp4tables::encode(m.blocks, m.scales, kind), payload) << n << " blocks, AVX2";
            fp4tables::allow_simd(false);
            EXPECT_EQ(fp4tables::encode(m.blocks, m.scales, kind), payload) << n << " blocks";
            fp4tables::allow_simd(true);
            // Every decoder (kDecoders).
            for (int mode : kDecoders) {
                use_decoder(mode);
                std::vector<uint8_t> out(m.blocks.size(), 0x55);
                fp4tables::decode(payload, out, m.scales);
                EXPECT_EQ(out, m.blocks) << n << " blocks, kind " << static_cast<int>(kind) << ", mode " << mode;
                // A damaged stretch of the (first) stream. (A single
                // flipped bit can move a state by so little that it ends
                // among the raw values the final states hold, unseen: the
                // chunk checksum is what catches those.)
                auto bad = payload;
                for (size_t k = 0; k < 16; ++k) bad[bad.size() / 8 + k] ^= 0xFF;
                EXPECT_THROW(fp4tables::decode(bad, out, m.scales), CorruptData) << "mode " << mode;
                EXPECT_THROW(fp4tables::decode(std::span(payload).first(payload.size() - 2), out, m.scales), CorruptData);
            }
            use_best_decoder();
            fp4tables::split_from(0);
        }
}

// The SIMD decoder holds a table as 32 buckets of slots, each with the
// symbols that start inside it (up to five, else it gathers from the slot
// tables). Rare symbols next to each other in code order start close
// together: from none to fourteen of them, every layout decodes to the
// same bytes as the gathers and the value-by-value decoder.
TEST(Fp4Tables, WideLayoutDecodesTablesWithManyRareSymbols) {
    for (unsigned rare = 0; rare <= 14; ++rare) {
        std::mt19937 rng(rare);
        const size_t nblocks = 300;  // MX: 4800 bytes, the wide layout
        std::vector<uint8_t> blocks(nblocks * 16), scales(nblocks, 0x7F);
        for (auto& b : blocks) {
            auto nibble = [&]() -> unsigned {
                const unsigned r = rng() % 4096;
                if (r < rare) return 1 + r;           // symbols 1..rare: about once in 4096 each
                return (r & 1) ? 0 : 15;             // the common two at the ends
            };
            b = static_cast<uint8_t>(nibble() | nibble() << 4);
        }
        const auto payload = fp4tables::encode(blocks, scales, fp4tables::Kind::mx);
        ASSERT_EQ(payload[0] & 2, 2) << "the wide layout";
        for (int mode : kDecoders) {
            use_decoder(mode);
            std::vector<uint8_t> out(blocks.size(), 0x55);
            fp4tables::decode(payload, out, scales);
            EXPECT_EQ(out, blocks) << rare << " rare symbols, mode " << mode;
        }
        use_best_decoder();
    }
}

TEST(Fp4Tables, RoundTripsEveryByteValueAndOneScale) {
    // Blocks holding every byte value, all under one scale: one group.
    for (auto kind : kKinds) {
        const unsigned bb = fp4tables::block_bytes(kind);
        std::vector<uint8_t> blocks(256 * 4);
        for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<uint8_t>(i * 7);
        const std::vector<uint8_t> scales(blocks.size() / bb, 0x7F);
        const auto payload = fp4tables::encode(blocks, scales, kind);
        std::vector<uint8_t> out(blocks.size());
        fp4tables::decode(payload, out, scales);
        EXPECT_EQ(out, blocks);
    }
}

TEST(Fp4Tables, CodesBelowTheOrderZeroBoundOfItsPlane) {
    // What the codec is for: values whose spread follows their scale code
    // below the order-0 entropy of the blocks' bytes, tables and states
    // included (the grouped planes' htscodecs overhead did not allow that
    // on small tensors).
    for (auto kind : kKinds) {
        const Blocks m = make_blocks(kind, 600, 9);
        const auto payload = fp4tables::encode(m.blocks, m.scales, kind);
        const double bound = order0_bits(std::span<const uint8_t>(m.blocks)) / 8;
        EXPECT_LT(static_cast<double>(payload.size()), bound) << static_cast<int>(kind);
    }
}

TEST(Fp4Tables, ChunksOfDecompositions13And14RoundTripThroughTheChunkCodec) {
    for (auto [d, kind] : {std::pair{Decomposition::fp4_mx_tabled, fp4tables::Kind::mx},
                           std::pair{Decomposition::fp4_nv_tabled, fp4tables::Kind::nv}}) {
        const Blocks m = make_blocks(kind, 333, 4);
        const auto c = encode_chunk(m.blocks, d, {}, m.scales);
        ASSERT_EQ(c.entry.plane_count, 1u);
        EXPECT_EQ(c.entry.codec[0], Codec::fp4_tables);
        std::vector<uint8_t> out(m.blocks.size());
        decode_chunk_payload(c.entry, c.payload, out, m.scales);
        EXPECT_EQ(out, m.blocks) << name(d);
        // Other scales pick other tables: an error, never other bytes.
        auto wrong = m.scales;
        for (auto& s : wrong) s = static_cast<uint8_t>(s ^ 0x08);
        EXPECT_THROW(decode_chunk_payload(c.entry, c.payload, out, wrong), CorruptData) << name(d);
        EXPECT_THROW(decode_chunk_payload(c.entry, c.payload, out, std::span(m.scales).first(332)), CorruptData);
    }
}

void expect_corrupt(std::span<const uint8_t> payload, std::span<const uint8_t> scales, size_t n, const char* what) {
    std::vector<uint8_t> out(n);
    try {
        fp4tables::decode(payload, out, scales);
        ADD_FAILURE() << what << ": decoded without error";
    } catch (const CorruptData& e) {
        EXPECT_NE(std::string(e.what()).find("fp4-tables"), std::string::npos) << what << ": " << e.what();
    }
}

TEST(Fp4Tables, DamagedPayloadsAreErrorsThatNameTheCodec) {
    const Blocks m = make_blocks(fp4tables::Kind::mx, 100, 5);
    const auto good = fp4tables::encode(m.blocks, m.scales, fp4tables::Kind::mx);
    const size_t n = m.blocks.size();
    expect_corrupt(std::span(good).first(3), m.scales, n, "header cut");
    auto bad = good;
    bad[0] = 2;
    expect_corrupt(bad, m.scales, n, "unknown kind");
    bad = good;
    bad[2] = 0;
    expect_corrupt(bad, m.scales, n, "no groups");
    bad[2] = 17;
    expect_corrupt(bad, m.scales, n, "17 groups");
    bad = good;
    bad[3] = 13;
    expect_corrupt(bad, m.scales, n, "precision 13");
    expect_corrupt(std::span(good).first(good.size() - 1), m.scales, n, "stream cut");
    expect_corrupt(good, std::span(m.scales).first(99), n, "a scale short");
    // A flipped bit in the stream: the states do not come back to their start.
    for (size_t at : {good.size() / 2, good.size() - 1}) {
        bad = good;
        bad[at] ^= 0x10;
        expect_corrupt(bad, m.scales, n, "flipped bit");
    }
    // Every truncation is an error, never a crash (ASan runs this too).
    for (size_t len = 0; len < good.size(); len += 7) expect_corrupt(std::span(good).first(len), m.scales, n, "cut");
    bad = good;
    bad[0] |= 4;
    expect_corrupt(bad, m.scales, n, "the split layout without the wide one");
}

// A block whose group has no table is an error that names the block. The
// encoder gives every group a table; a payload whose header claims one
// more group than it describes reads that group's table from the zero bits
// after the last one, as absent, and a block whose scale lies past the
// other groups falls in it. (The decoder checks blocks one by one only
// where some group has no table.)
TEST(Fp4Tables, ABlockWhoseGroupHasNoTableIsAnError) {
    for (fp4tables::Kind kind : kKinds) {
        const Blocks m = make_blocks(kind, 3000, 21);
        const auto good = fp4tables::encode(m.blocks, m.scales, kind);
        std::vector<uint8_t> out(m.blocks.size());
        fp4tables::decode(good, out, m.scales);
        ASSERT_EQ(out, m.blocks);
        auto more = good;
        ++more[2];
        auto scales = m.scales;
        scales[7] = kind == fp4tables::Kind::mx ? 0xFF : 0x7E;  // the largest context: the last group
        try {
            fp4tables::decode(more, out, scales);
            ADD_FAILURE() << "decoded a block with no table";
        } catch (const CorruptData& e) {
            EXPECT_NE(std::string(e.what()).find("block 7 has no table"), std::string::npos) << e.what();
        }
    }
}

// The split layout's streams have their count and all but the last one's
// length in front of them (varints after the header and tables): a count
// or a length that does not fit, or one that moves the boundary between
// the streams, is an error.
TEST(Fp4Tables, DamagedSplitPayloadsAreErrors) {
    const Blocks m = make_blocks(fp4tables::Kind::nv, 9000, 6);
    const auto good = fp4tables::encode(m.blocks, m.scales, fp4tables::Kind::nv);
    ASSERT_EQ(good[0], 1 | 2 | 4 | 8) << "NV, wide, split, packed states";
    const size_t n = m.blocks.size();
    // The length field: the varint after the count (2) whose value leaves
    // the second stream about as long as the first (three bytes here: the
    // streams are some 22 KB each).
    size_t at = 0, width = 0, first = 0;
    for (size_t k = 5; k + 3 < good.size() && !at; ++k) {
        size_t v = 0, w = 0;
        while (w < 3 && (w == 0 || (good[k + w - 1] & 0x80))) v |= size_t{good[k + w] & 0x7Fu} << (7 * w), ++w;
        if (good[k - 1] == 2 && !(good[k + w - 1] & 0x80) && k + w + v < good.size() &&
            std::abs(static_cast<long>(good.size() - k - w - v) - static_cast<long>(v)) < 256)
            at = k, width = w, first = v;
    }
    ASSERT_NE(at, 0u) << "no length field found";
    // Another length in as many bytes (LEB128 may pad with 0x80 bytes).
    const auto with_length = [&](size_t v) {
        auto bad = good;
        for (size_t b = 0; b < width; ++b) bad[at + b] = static_cast<uint8_t>(((v >> (7 * b)) & 0x7F) | (b + 1 < width ? 0x80 : 0));
        return bad;
    };
    for (size_t v : {first - 2, first + 2, size_t{0}, good.size()})
        expect_corrupt(with_length(v), m.scales, n, ("first stream's length " + std::to_string(v)).c_str());
    // The stream count before it: 2 here; 1, 3 (lengths misread) and 5 are errors.
    ASSERT_EQ(good[at - 1], 2);
    for (uint8_t k : {1, 3, 5}) {
        auto bad = good;
        bad[at - 1] = k;
        expect_corrupt(bad, m.scales, n, ("stream count " + std::to_string(k)).c_str());
    }
    for (size_t len = 0; len < good.size(); len += 97) expect_corrupt(std::span(good).first(len), m.scales, n, "cut");
}

}  // namespace
}  // namespace ptwm
