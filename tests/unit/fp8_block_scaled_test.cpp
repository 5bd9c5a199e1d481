// DeepSeek-V3-style FP8 pairs (issue 13 point 5): `X.weight` F8_E4M3 [out, in]
// quantised per 128x128 block with `X.weight_scale_inv` F32
// [ceil(out/128), ceil(in/128)]. The store codes the FP8 bytes with
// f8-tables under classes per row (rows of [out, in] weights differ in scale
// more than columns; the block scales gave no better context than the rows'
// own mean exponents, so the scale tensor is not read to decode): byte-exact
// round trips, below the bytes' order-0 bound, damage refused.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>

#include "e4m3.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/codecs/codec.hpp"
#include "ptwm/store/store_reader.hpp"
#include "ptwm/store/store_writer.hpp"
#include "test_files.hpp"

namespace ptwm {
namespace {

struct BlockScaled {
    std::vector<uint8_t> weight;     // F8_E4M3 [rows, cols]
    std::vector<uint8_t> scale_inv;  // F32 [ceil(rows/128), ceil(cols/128)]
};

// Output channels (rows) whose scales spread over 16x, quantised per
// 128x128 block to its absolute maximum, as DeepSeek-V3's checkpoints are.
BlockScaled block_scaled(size_t rows, size_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0, 1);
    std::vector<float> w(rows * cols);
    for (size_t r = 0; r < rows; ++r) {
        const float s = std::exp2(4.f * static_cast<float>(rng() % 1000) / 1000.f);
        for (size_t c = 0; c < cols; ++c) w[r * cols + c] = normal(rng) * s;
    }
    const size_t br = (rows + 127) / 128, bc = (cols + 127) / 128;
    std::vector<float> scale(br * bc, 0);
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) {
            float& m = scale[r / 128 * bc + c / 128];
            m = std::max(m, std::fabs(w[r * cols + c]) / 448.f);
        }
    BlockScaled out;
    out.weight.resize(w.size());
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) out.weight[r * cols + c] = to_e4m3(w[r * cols + c] / scale[r / 128 * bc + c / 128], false);
    out.scale_inv = test::as_f32_bytes(scale);
    return out;
}

TEST(Fp8BlockScaled, PairRoundTripsBelowTheByteBoundWithRowClasses) {
    test::TempDir dir;
    const size_t rows = 300, cols = 520;  // partial blocks at both edges
    const auto a = block_scaled(rows, cols, 1);
    const auto file = test::make_safetensors({
        {"layers.0.mlp.weight", "F8_E4M3", {rows, cols}, a.weight},
        {"layers.0.mlp.weight_scale_inv", "F32", {3, 5}, a.scale_inv},
    });
    test::write_file(dir / "m.safetensors", file);
    PackOptions opt;
    opt.chunk_bytes = 64 << 10;  // three chunks, the last a partial row
    pack_file(dir / "m.safetensors", dir / "m.ptwm", opt);
    const auto store = StoreReader::open(dir / "m.ptwm");
    std::vector<uint8_t> back(store->original_size());
    store->read(0, back);
    ASSERT_EQ(back, file);

    // The weight's chunks: f8-tables with classes per row (flag 64), the
    // whole tensor below its bytes' order-0 entropy.
    const auto stored = test::read_file(dir / "m.ptwm");
    uint64_t weight_stored = 0;
    size_t row_classed = 0, weight_chunks = 0;
    for (size_t i = 0; i < store->chunk_count(); ++i) {
        const ChunkEntry& e = store->chunk(i);
        if (store->header().tensors[e.tensor].name != "layers.0.mlp.weight") continue;
        ++weight_chunks;
        weight_stored += e.stored_length();
        ASSERT_EQ(e.codec[0], Codec::f8_tables);
        row_classed += (stored[e.stored_offset] & 64) != 0;
    }
    EXPECT_EQ(weight_chunks, 3u);
    EXPECT_EQ(row_classed, weight_chunks);
    EXPECT_LT(static_cast<double>(weight_stored), order0_bits(a.weight) / 8);

    // Random reads across chunk and row boundaries.
    std::mt19937 rng(5);
    for (int i = 0; i < 50; ++i) {
        const uint64_t at = rng() % file.size(), n = std::min<uint64_t>(rng() % 70000, file.size() - at);
        std::vector<uint8_t> part(n);
        store->read(at, part);
        ASSERT_TRUE(std::equal(part.begin(), part.end(), file.begin() + static_cast<long>(at)));
    }

    // A damaged byte in the middle of a row-classed payload: the read fails
    // with CorruptData, never wrong bytes or a crash.
    const ChunkEntry& first = store->chunk(store->find_chunk(store->header().tensors[0].begin));
    auto bad = stored;
    bad[first.stored_offset + first.payload_length[0] / 2] ^= 0x41;
    test::write_file(dir / "bad.ptwm", bad);
    const auto damaged = StoreReader::open(dir / "bad.ptwm");
    std::vector<uint8_t> out(first.original_length);
    EXPECT_THROW(damaged->read(first.original_offset, out), CorruptData);
}

}  // namespace
}  // namespace ptwm
