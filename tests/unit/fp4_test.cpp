// FP4 microscaling: the chains over nibble pairs and the scale-grouped
// decompositions must give back every byte, paired or not.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include "ptwm/base/error.hpp"
#include "ptwm/planes/fp4_groups.hpp"
#include "ptwm/store/chunk_codec.hpp"
#include "ptwm/store/scale_pairs.hpp"
#include "ptwm/store/store_reader.hpp"
#include "ptwm/store/store_writer.hpp"
#include "test_files.hpp"

namespace ptwm {
namespace {

using test::TempDir;
using test::TestTensor;

// MXFP4-like data: per block an E8M0 scale and 32 E2M1 nibbles whose
// spread depends on the scale, as in real quantised weights.
struct Mx {
    std::vector<uint8_t> blocks, scales;
};
Mx make_mx(size_t nblocks, unsigned block_bytes, uint32_t seed) {
    std::mt19937 rng(seed);
    Mx m;
    for (size_t b = 0; b < nblocks; ++b) {
        const uint8_t scale = static_cast<uint8_t>(118 + rng() % 5);
        m.scales.push_back(scale);
        for (unsigned k = 0; k < block_bytes; ++k) {
            auto nibble = [&] {
                const unsigned mag = std::min(7u, static_cast<unsigned>(std::abs(std::normal_distribution<double>(0, 1.0 + (scale - 118) * 0.6)(rng))));
                return static_cast<uint8_t>(mag | ((rng() & 1) << 3));
            };
            m.blocks.push_back(static_cast<uint8_t>(nibble() | (nibble() << 4)));
        }
    }
    return m;
}

TEST(Fp4, SignMagnitudeRoundTripsEveryByte) {
    std::vector<uint8_t> all(256);
    for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
    for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{256}}) {
        const std::vector<uint8_t> in(all.begin(), all.begin() + static_cast<long>(n));
        ChunkEntry e;
        e.decomposition = Decomposition::fp4_sign_magnitude;
        const auto planes = chunk_planes(e, in);
        ASSERT_EQ(planes.size(), 2u);
        std::vector<uint8_t> out(n);
        const uint8_t* p[] = {planes[0].data(), planes[1].data()};
        merge(Decomposition::fp4_sign_magnitude, p, out);
        EXPECT_EQ(out, in) << n;
    }
}

TEST(Fp4, GroupedChunksRoundTripWithTheirScales) {
    for (auto [d, bb] : {std::pair{Decomposition::fp4_mx_grouped, 16u}, std::pair{Decomposition::fp4_nv_grouped, 8u}}) {
        auto mx = make_mx(333, bb, 4);  // an odd block count
        if (d == Decomposition::fp4_nv_grouped)
            for (auto& s : mx.scales) s = static_cast<uint8_t>(0x30 + (s - 118) * 8 + 3);  // E4M3 scales
        const auto c = encode_chunk(mx.blocks, d, {}, mx.scales);
        std::vector<uint8_t> out(mx.blocks.size());
        decode_chunk_payload(c.entry, c.payload, out, mx.scales);
        EXPECT_EQ(out, mx.blocks) << name(d);
        // Decoding with other scales deals the nibbles elsewhere: the checksum says so.
        auto wrong = mx.scales;
        std::swap(wrong[0], wrong[1]);
        if (wrong != mx.scales) {
            EXPECT_THROW(decode_chunk_payload(c.entry, c.payload, out, wrong), CorruptData);
        }
    }
}

// The merge takes the planes' values as a byte's nibbles, low first, and
// drops bits above a nibble (a damaged plane: the checksum then tells), in
// every group order and for both block sizes, whatever the vector path does.
TEST(Fp4, GroupedMergeMatchesTheNibbleFormulaForAnyPlaneBytes) {
    std::mt19937 rng(11);
    for (auto [d, bb] : {std::pair{Decomposition::fp4_mx_grouped, 16u}, std::pair{Decomposition::fp4_nv_grouped, 8u}}) {
        std::vector<uint8_t> scales(257);
        for (auto& s : scales) s = static_cast<uint8_t>(d == Decomposition::fp4_nv_grouped ? 0x28 + rng() % 40 : 118 + rng() % 11);
        const uint8_t base = group_base(d, scales);
        const auto len = group_plane_lengths(d, scales, base);
        std::array<std::vector<uint8_t>, kMaxPlanes> planes;
        std::array<const uint8_t*, kMaxPlanes> at{};
        for (unsigned g = 0; g < kMaxPlanes; ++g) {
            planes[g].resize(len[g]);
            for (auto& b : planes[g]) b = static_cast<uint8_t>(rng());  // any byte, not only nibbles
            at[g] = planes[g].data();
        }
        std::vector<uint8_t> out(scales.size() * bb), want(out.size());
        auto cursor = at;
        for (size_t b = 0; b < scales.size(); ++b) {
            // The block's group: the one plane whose length a lone block of this scale takes.
            const auto single = group_plane_lengths(d, std::span(&scales[b], 1), base);
            const unsigned g = static_cast<unsigned>(std::find_if(single.begin(), single.end(), [](size_t n) { return n > 0; }) - single.begin());
            for (unsigned k = 0; k < bb; ++k, cursor[g] += 2)
                want[b * bb + k] = static_cast<uint8_t>((cursor[g][0] & 0x0F) | (cursor[g][1] << 4));
        }
        merge_grouped(d, at, scales, base, out);
        EXPECT_EQ(out, want) << name(d);
    }
}

// The FP4 context model (decomposition 12, codec 8) decodes with the block
// scales and the chunk's offset in its tensor, for any block count.
TEST(Fp4, ModelledChunksRoundTripWithTheirScalesAtAnyOffset) {
    for (size_t blocks : {1u, 7u, 333u}) {
        const auto mx = make_mx(blocks, 16, 4);
        const std::vector<uint64_t> shape = {blocks, 16};
        for (uint64_t offset : {uint64_t{0}, uint64_t{16 * 5}}) {
            const TensorLayout where{shape, offset, DType::U8, {}};
            const auto c = encode_chunk(mx.blocks, Decomposition::fp4_mx_modelled, {}, mx.scales, where);
            EXPECT_EQ(c.entry.codec[0], Codec::fp4_model);
            std::vector<uint8_t> out(mx.blocks.size());
            decode_chunk_payload(c.entry, c.payload, out, mx.scales, where);
            EXPECT_EQ(out, mx.blocks) << blocks << " blocks at offset " << offset;
            EXPECT_THROW(decode_chunk_payload(c.entry, c.payload, out, std::span(mx.scales).first(blocks - 1), where),
                         CorruptData);
        }
    }
    // At the slow levels a grouped MXFP4 chunk competes against the model.
    const auto mx = make_mx(333, 16, 4);
    EncodeOptions slow;
    slow.level = 9;
    const auto c = encode_chunk(mx.blocks, Decomposition::fp4_mx_grouped, slow, mx.scales);
    std::vector<uint8_t> out(mx.blocks.size());
    decode_chunk_payload(c.entry, c.payload, out, mx.scales);
    EXPECT_EQ(out, mx.blocks) << name(c.entry.decomposition);
}

// find_scale_pairs' entry for the tensor named `name`.
std::optional<ScalePair> scale_pair_of(const SafetensorsHeader& h, const std::string& name) {
    const auto i = h.find(name);
    return i ? find_scale_pairs(h)[*i] : std::nullopt;
}

// `blocks` pairs with `scales` as decomposition d.
void expect_paired(const SafetensorsHeader& h, const std::string& blocks, const std::string& scales, Decomposition d) {
    const auto pair = scale_pair_of(h, blocks);
    ASSERT_TRUE(pair) << blocks << " has no scale tensor";
    EXPECT_EQ(h.tensors[pair->scale_tensor].name, scales);
    EXPECT_EQ(pair->decomposition, d) << blocks;
}

TEST(Fp4, PairsByNameAndShapeOnly) {
    const auto mx = make_mx(64, 16, 1);
    const std::vector<uint8_t> short_scales(mx.scales.begin(), mx.scales.end() - 1);
    const auto bytes = test::make_safetensors({{"w.blocks", "U8", {64, 16}, mx.blocks},
                                               {"w.scales", "U8", {64}, mx.scales},
                                               {"v_blocks", "U8", {64, 16}, mx.blocks},
                                               {"v_scales", "F8_E8M0", {64}, mx.scales},
                                               {"lonely.blocks", "U8", {64, 16}, mx.blocks},
                                               {"odd.blocks", "U8", {64, 16}, mx.blocks},
                                               {"odd.scales", "U8", {63}, short_scales}});
    const auto h = parse_safetensors(bytes, bytes.size(), "x");
    auto pair_of = [&](const std::string& name) { return scale_pair_of(h, name); };
    expect_paired(h, "w.blocks", "w.scales", Decomposition::fp4_mx_grouped);
    expect_paired(h, "v_blocks", "v_scales", Decomposition::fp4_mx_grouped);
    EXPECT_FALSE(pair_of("lonely.blocks"));
    EXPECT_FALSE(pair_of("odd.blocks")) << "63 scales do not pair with 64 blocks";
    EXPECT_FALSE(pair_of("w.scales"));
}

// compressed-tensors (llm-compressor's NVFP4 and MXFP4 checkpoints, which
// vLLM loads): `weight_packed` U8 [out, in / 2] with `weight_scale`, F8_E4M3
// [out, in / 16] or E8M0 bytes [out, in / 32]. Its INT4 schemes reuse the
// names with I32 words and BF16 scales: not FP4, not paired.
TEST(Fp4, PairsCompressedTensorsNames) {
    const auto mx = make_mx(64, 16, 1);
    const std::vector<uint8_t> nv_scales(2 * mx.scales.size(), 0x38), bf16_scales(64 * 2, 0);
    const auto bytes = test::make_safetensors({{"nv.weight_packed", "U8", {64, 16}, mx.blocks},
                                               {"nv.weight_scale", "F8_E4M3", {64, 2}, nv_scales},
                                               {"nv.weight_global_scale", "F32", {1}, std::vector<uint8_t>(4, 0)},
                                               {"mx.weight_packed", "U8", {64, 16}, mx.blocks},
                                               {"mx.weight_scale", "U8", {64, 1}, mx.scales},
                                               {"int4.weight_packed", "I32", {64, 4}, mx.blocks},
                                               {"int4.weight_scale", "BF16", {64, 1}, bf16_scales}});
    const auto h = parse_safetensors(bytes, bytes.size(), "x");
    expect_paired(h, "nv.weight_packed", "nv.weight_scale", Decomposition::fp4_nv_grouped);
    expect_paired(h, "mx.weight_packed", "mx.weight_scale", Decomposition::fp4_mx_grouped);
    EXPECT_FALSE(scale_pair_of(h, "int4.weight_packed"));
    EXPECT_FALSE(scale_pair_of(h, "nv.weight_scale"));
}

// Names no rule knows pair with the one scale-named tensor of their module
// that has their block scales' size and dtype: TensorRT-LLM's checkpoints
// (`weight` with `weights_scaling_factor`), and a module of several FP4
// tensors each with its own scales. Never two guesses, never across
// modules, never a scale-named tensor as the blocks.
TEST(Fp4, PairsTheOneScaleOfItsModuleOtherwise) {
    const auto mx = make_mx(64, 16, 1);
    const std::vector<uint8_t> nv_scales(2 * mx.scales.size(), 0x38), f32(4, 0);
    const auto bytes = test::make_safetensors({
        {"trt.qkv.weight", "U8", {64, 16}, mx.blocks},
        {"trt.qkv.weights_scaling_factor", "F8_E4M3", {64, 2}, nv_scales},
        {"trt.qkv.weights_scaling_factor_2", "F32", {1}, f32},
        {"moe.experts.gate_up_weights", "U8", {64, 16}, mx.blocks},
        {"moe.experts.gate_up_weights_scaling_factor", "F8_E4M3", {64, 2}, nv_scales},
        {"moe.experts.up_weights", "U8", {64, 16}, mx.blocks},  // both scales fit both: by leaf
        {"moe.experts.up_weights_scaling_factor", "F8_E4M3", {64, 2}, nv_scales},
        {"two.weight", "U8", {64, 16}, mx.blocks},
        {"two.scale_a", "F8_E4M3", {64, 2}, nv_scales},
        {"two.scale_b", "F8_E4M3", {64, 2}, nv_scales},
        {"away.weight", "U8", {64, 16}, mx.blocks},
        {"elsewhere.weight_scale", "F8_E4M3", {64, 2}, nv_scales},
        {"sc.scales_u8", "U8", {64, 16}, mx.blocks},
        {"sc.block_scale", "F8_E4M3", {64, 2}, nv_scales},
    });
    const auto h = parse_safetensors(bytes, bytes.size(), "x");
    expect_paired(h, "trt.qkv.weight", "trt.qkv.weights_scaling_factor", Decomposition::fp4_nv_grouped);
    expect_paired(h, "moe.experts.gate_up_weights", "moe.experts.gate_up_weights_scaling_factor",
                  Decomposition::fp4_nv_grouped);
    expect_paired(h, "moe.experts.up_weights", "moe.experts.up_weights_scaling_factor", Decomposition::fp4_nv_grouped);
    EXPECT_FALSE(scale_pair_of(h, "two.weight")) << "two scales fit: no guess";
    EXPECT_FALSE(scale_pair_of(h, "away.weight")) << "scales of another module";
    EXPECT_FALSE(scale_pair_of(h, "sc.scales_u8")) << "a scale-named tensor is never the blocks";
}

// A scale tensor whose own name and size make it blocks too (`w`, `w_scale`,
// `w_scale_scale`, each a sixteenth of the one before: a checkpoint of
// nested or double-quantised scales, or a chance of names) is not grouped
// by its scales: a reader refuses a grouped chunk whose scales are grouped
// (their scales would have to decode first), so a store that paired the
// chain packed fine and then could not be opened at all. The chain's head
// keeps its pair; the links below it are plain tensors.
TEST(Fp4, AScaleTensorIsNeverPairedAsBlocks) {
    const auto mx = make_mx(4096, 16, 5);  // scales of 4 KiB: grouped chunks, not small streams
    const auto inner = make_mx(256, 16, 6);
    const std::vector<uint8_t> scale_scales(inner.scales.begin(), inner.scales.begin() + 256);
    const auto bytes = test::make_safetensors({
        {"w", "U8", {4096, 16}, mx.blocks},
        {"w_scale", "U8", {4096}, mx.scales},
        {"w_scale_scale", "U8", {256}, scale_scales},
        {"w_scale_scale_scale", "U8", {16}, std::vector<uint8_t>(16, 127)},
    });
    const auto h = parse_safetensors(bytes, bytes.size(), "x");
    expect_paired(h, "w", "w_scale", Decomposition::fp4_mx_grouped);
    EXPECT_FALSE(scale_pair_of(h, "w_scale")) << "w_scale holds w's scales";
    EXPECT_FALSE(scale_pair_of(h, "w_scale_scale")) << "w_scale_scale holds w_scale's scales by name";

    // The store of such a file opens and gives every byte back, with the
    // blocks as blocks, at any chunk size.
    for (uint32_t chunk : {4096u, 64u << 10}) {
        TempDir dir;
        test::write_file(dir / "m.safetensors", bytes);
        PackOptions opt;
        opt.chunk_bytes = chunk;
        pack_file(dir / "m.safetensors", dir / "m.ptwm", opt);
        const auto store = StoreReader::open(dir / "m.ptwm");
        std::vector<uint8_t> back(store->original_size());
        store->read(0, back);
        EXPECT_EQ(back, bytes) << chunk;
        for (size_t i = 0; i < store->chunk_count(); ++i) {
            const auto& e = store->chunk(i);
            EXPECT_EQ(is_grouped(e.decomposition), store->header().tensors[e.tensor].name == "w") << chunk << " chunk " << i;
        }
    }
}

TEST(Fp4, MxStoreRoundTripsAndBeatsTheUngroupedStream) {
    TempDir dir;
    const auto a = make_mx(5001, 16, 2), b = make_mx(77, 16, 3);
    const auto file = test::make_safetensors({
        {"a.blocks", "U8", {5001, 16}, a.blocks},
        {"a.scales", "U8", {5001}, a.scales},
        {"b_blocks", "U8", {77, 16}, b.blocks},
        {"b_scales", "F8_E8M0", {77}, b.scales},
        {"orphan.blocks", "U8", {77, 16}, b.blocks},  // no scales: coded as plain bytes
        {"f4", "F4", {2, 77}, std::vector<uint8_t>(b.blocks.begin(), b.blocks.begin() + 77)},
    });
    test::write_file(dir / "m.safetensors", file);
    PackOptions opt;
    opt.chunk_bytes = 16 << 10;  // several grouped chunks in tensor a
    pack_file(dir / "m.safetensors", dir / "m.ptwm", opt);
    const auto store = StoreReader::open(dir / "m.ptwm");
    std::vector<uint8_t> back(store->original_size());
    store->read(0, back);
    EXPECT_EQ(back, file);

    size_t grouped = 0;
    for (size_t i = 0; i < store->chunk_count(); ++i) {
        const auto& e = store->chunk(i);
        const auto& tensor = store->header().tensors[e.tensor].name;
        if (is_grouped(e.decomposition)) {
            ++grouped;
            EXPECT_TRUE(tensor == "a.blocks" || tensor == "b_blocks") << tensor;
        }
        EXPECT_FALSE(tensor == "orphan.blocks" && is_grouped(e.decomposition));
    }
    EXPECT_GT(grouped, 5u);
    // Random reads inside grouped chunks decode their scales on the way.
    std::mt19937 rng(8);
    for (int i = 0; i < 100; ++i) {
        const uint64_t at = rng() % file.size(), n = std::min<uint64_t>(rng() % 5000, file.size() - at);
        std::vector<uint8_t> part(n);
        store->read(at, part);
        ASSERT_TRUE(std::equal(part.begin(), part.end(), file.begin() + static_cast<long>(at)));
    }
}

// Every chunk of a paired FP4 tensor takes fp4-tables, but a small one is
// also coded as a stream and the smaller kept: constant blocks code to a
// byte or so as a stream, to some 20 under tables. Such a chunk names no
// scale tensor in the index, and the store reads back whole.
TEST(Fp4, SmallChunksOfConstantBlocksComeOutAsAStream) {
    TempDir dir;
    const auto a = make_mx(5001, 16, 4);
    const std::vector<uint8_t> flat(100 * 16, 0x11), flat_scales(100, 120);
    const auto file = test::make_safetensors({
        {"a.blocks", "U8", {5001, 16}, a.blocks},
        {"a.scales", "U8", {5001}, a.scales},
        {"flat.blocks", "U8", {100, 16}, flat},
        {"flat.scales", "U8", {100}, flat_scales},
    });
    test::write_file(dir / "m.safetensors", file);
    pack_file(dir / "m.safetensors", dir / "m.ptwm", {});
    const auto store = StoreReader::open(dir / "m.ptwm");
    std::vector<uint8_t> back(store->original_size());
    store->read(0, back);
    EXPECT_EQ(back, file);
    bool saw_flat = false, saw_a = false;
    for (size_t i = 0; i < store->chunk_count(); ++i) {
        const auto& e = store->chunk(i);
        const auto& tensor = store->header().tensors[e.tensor].name;
        if (tensor == "flat.blocks") {
            saw_flat = true;
            EXPECT_EQ(e.decomposition, Decomposition::stream);
            EXPECT_EQ(e.scale_tensor, kNoTensor);
            EXPECT_LE(e.stored_length(), 8u);
        }
        if (tensor == "a.blocks") {
            saw_a = true;
            EXPECT_EQ(e.decomposition, Decomposition::fp4_mx_tabled);
            EXPECT_NE(e.scale_tensor, kNoTensor);
        }
    }
    EXPECT_TRUE(saw_flat && saw_a);
}

// MXFP4 stores m<seed>.ptwm in `dir`, one per seed, of `nblocks` blocks
// (w.blocks, w.scales) in chunks of 3000 bytes: the blocks chunks' scales
// then lie across the scale tensor's chunk boundaries, and a scale tensor
// of a few KiB spans several chunks. Returns the original files.
std::vector<std::vector<uint8_t>> pack_mx_stores(const TempDir& dir, size_t nblocks, std::initializer_list<uint32_t> seeds) {
    PackOptions opt;
    opt.chunk_bytes = 3000;
    std::vector<std::vector<uint8_t>> files;
    for (uint32_t seed : seeds) {
        const auto m = make_mx(nblocks, 16, seed);
        files.push_back(test::make_safetensors({{"w.blocks", "U8", {nblocks, 16}, m.blocks}, {"w.scales", "U8", {nblocks}, m.scales}}));
        const auto name = dir / ("m" + std::to_string(seed));
        test::write_file(name.string() + ".safetensors", files.back());
        pack_file(name.string() + ".safetensors", name.string() + ".ptwm", opt);
    }
    return files;
}

// Overwrites three bytes in the middle of chunk e's stored payload.
void damage_chunk(const std::filesystem::path& store, const ChunkEntry& e) {
    std::fstream f(store, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(e.stored_offset + e.stored_length() / 2));
    f.put('\x55').put('\xAA').put('\x55');
}

// A thread keeps the scale chunk it decoded last for the grouped chunks
// after it. Two stores alike in layout (the same tensors, chunk numbers and
// scale chunks) but not in bytes, read chunk by chunk in turn on one thread,
// and one reopened: each chunk must decode with its own store's scales (the
// checksum fails otherwise). Chunks of 3000 bytes put the blocks chunks'
// scales across the scale tensor's chunk boundaries.
TEST(Fp4, GroupedChunksTakeTheirOwnStoresScales) {
    TempDir dir;
    const auto files = pack_mx_stores(dir, 5001, {11, 12});
    const auto open = [&](int k) { return StoreReader::open(dir / ("m" + std::to_string(11 + k) + ".ptwm")); };
    std::array<std::unique_ptr<StoreReader>, 2> store = {open(0), open(1)};
    ASSERT_EQ(store[0]->chunk_count(), store[1]->chunk_count());
    size_t grouped = 0;
    for (int round = 0; round < 2; ++round) {
        for (size_t i = 0; i < store[0]->chunk_count(); ++i)
            for (int k : {0, 1}) {
                const ChunkEntry e = store[k]->chunk(i);
                grouped += round == 0 && k == 0 && is_grouped(e.decomposition);
                std::vector<uint8_t> out(e.original_length);
                ASSERT_NO_THROW(store[k]->decode_chunk(i, out)) << "store " << k << ", chunk " << i;
                ASSERT_TRUE(std::equal(out.begin(), out.end(), files[k].begin() + static_cast<long>(e.original_offset)))
                    << "store " << k << ", chunk " << i;
            }
        store[1] = open(1);  // a new reader over the same file: its own memo key
    }
    EXPECT_GT(grouped, 20u) << "the grouped chunks the test meant to cover";
}

// A scale chunk decoded for the blocks before it is kept, and a read of
// the scale tensor itself that follows takes it from there: damaging its
// stored bytes afterwards does not reach that read, which a second decoding
// would have refused. It stays the reader's own: another store's chunk of
// the same index decodes from that store.
TEST(Fp4, AScaleChunkDecodedForItsBlocksIsNotDecodedAgain) {
    TempDir dir;
    const auto files = pack_mx_stores(dir, 2001, {21, 22});
    const auto path = [&](int k) { return dir / ("m" + std::to_string(21 + k) + ".ptwm"); };
    const auto a = StoreReader::open(path(0)), b = StoreReader::open(path(1));
    const auto decoded = [](const StoreReader& r, size_t i) {
        std::vector<uint8_t> out(r.chunk(i).original_length);
        r.decode_chunk(i, out);
        return out;
    };
    const auto original = [&](int k, const StoreReader& r, size_t i) {
        const ChunkEntry e = r.chunk(i);
        return std::vector<uint8_t>(files[k].begin() + static_cast<long>(e.original_offset),
                                    files[k].begin() + static_cast<long>(e.original_offset + e.original_length));
    };
    // The last blocks chunk and the scale chunk its scales come from.
    const size_t scales_at = a->header().tensors[1].begin;
    const size_t blocks = a->find_chunk(scales_at - 1), scales = a->find_chunk(a->header().tensors[1].end - 1);
    ASSERT_TRUE(is_grouped(a->chunk(blocks).decomposition));
    ASSERT_EQ(decoded(*a, blocks), original(0, *a, blocks));
    damage_chunk(path(0), a->chunk(scales));
    EXPECT_EQ(decoded(*a, scales), original(0, *a, scales));
    EXPECT_EQ(decoded(*b, scales), original(1, *b, scales));
    // A new reader of the damaged store decodes the chunk, and refuses it.
    const auto again = StoreReader::open(path(0));
    EXPECT_THROW(decoded(*again, scales), CorruptData);
}

// With a fetch (a mount's chunk cache), a grouped chunk takes its block
// scales from it, chunk by chunk of the scale tensor: with the scale
// chunks damaged in the store, every blocks chunk still decodes from the
// good bytes the fetch hands out, where a reader without one refuses them;
// a fetched chunk of the wrong size is an error.
TEST(Fp4, GroupedChunksTakeTheirScalesFromTheFetchGiven) {
    TempDir dir;
    const auto file = pack_mx_stores(dir, 5001, {31})[0];
    const auto path = dir / "m31.ptwm";
    const auto reader = StoreReader::open(path);
    const TensorInfo& scales = reader->header().tensors[1];
    const size_t first_scale_chunk = reader->find_chunk(scales.begin), end_scale_chunk = reader->find_chunk(scales.end - 1) + 1;
    ASSERT_GE(end_scale_chunk - first_scale_chunk, 2u) << "the scale tensor should span several chunks";
    for (size_t j = first_scale_chunk; j < end_scale_chunk; ++j) damage_chunk(path, reader->chunk(j));
    std::vector<size_t> fetched;
    const StoreReader::ScaleChunkFetch fetch = [&](size_t j) {
        fetched.push_back(j);
        const ChunkEntry e = reader->chunk(j);
        auto data = std::make_shared<ChunkData>(e.original_length);
        std::memcpy(data->writable_bytes().data(), file.data() + e.original_offset, e.original_length);
        return ChunkPtr(std::move(data));
    };
    size_t grouped = 0;
    for (size_t i = 0; i < first_scale_chunk; ++i) {
        const ChunkEntry e = reader->chunk(i);
        if (!is_grouped(e.decomposition)) continue;
        ++grouped;
        fetched.clear();
        std::vector<uint8_t> out(e.original_length);
        ASSERT_NO_THROW(reader->decode_chunk(i, out, fetch)) << "chunk " << i;
        EXPECT_TRUE(std::equal(out.begin(), out.end(), file.begin() + static_cast<long>(e.original_offset))) << "chunk " << i;
        ASSERT_FALSE(fetched.empty()) << "chunk " << i;
        for (size_t j : fetched) EXPECT_TRUE(j >= first_scale_chunk && j < end_scale_chunk) << "chunk " << i << " fetched " << j;
        std::vector<uint8_t> without(e.original_length);
        EXPECT_THROW(StoreReader::open(path)->decode_chunk(i, without), CorruptData) << "chunk " << i;
    }
    EXPECT_GT(grouped, 10u);
    const StoreReader::ScaleChunkFetch short_chunk = [](size_t) { return ChunkPtr(std::make_shared<ChunkData>(7)); };
    size_t g = 0;
    while (!is_grouped(reader->chunk(g).decomposition)) ++g;
    std::vector<uint8_t> out(reader->chunk(g).original_length);
    EXPECT_THROW(reader->decode_chunk(g, out, short_chunk), Error);
}

}  // namespace
}  // namespace ptwm
