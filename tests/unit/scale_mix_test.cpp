// scale-mix (codec 11): block scale tensors of MXFP4 (E8M0) and NVFP4 (E4M3).
// Every byte comes back under any layout and chunk offset, scales with row
// and column levels code below their order-0 bound and win the contest when
// the writer marks them as scales (and only then), and damaged payloads are
// errors or wrong bytes of the right length, never a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "e4m3.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/codecs/codec.hpp"

namespace ptwm {
namespace {

// NVFP4-like scales [rows, cols]: E4M3 bytes of block absmax, each ~ a(row) *
// b(col) * noise, a few all-zero blocks (byte 0), as ModelOpt writes them.
std::vector<uint8_t> nv_scales(size_t rows, size_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0, 0.35f);
    std::vector<float> a(rows), b(cols);
    for (auto& x : a) x = std::exp2(normal(rng) * 3);
    for (auto& x : b) x = std::exp2(normal(rng) * 3);
    std::vector<uint8_t> out(rows * cols);
    for (size_t i = 0; i < out.size(); ++i)
        out[i] = rng() % 97 == 0 ? 0 : to_e4m3(std::min(448.f, 40.f * a[i / cols] * b[i % cols] * std::exp2(normal(rng))));
    return out;
}

// MXFP4-like E8M0 scales, flat: rows of `row` scales with a level each.
std::vector<uint8_t> mx_scales(size_t n, size_t row, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> out(n);
    unsigned level = 122;
    for (size_t i = 0; i < n; ++i) {
        if (i % row == 0) level = 120 + rng() % 5;
        out[i] = static_cast<uint8_t>(level + (rng() % 4 == 0) - (rng() % 5 == 0));
        if (rng() % 211 == 0) out[i] = static_cast<uint8_t>(80 + rng() % 10);  // a far outlier
    }
    return out;
}

TEST(ScaleMix, RoundTripsEveryValueUnderEveryLayoutAndOffset) {
    std::mt19937 rng(3);
    std::vector<uint8_t> any(3000);
    for (auto& b : any) b = static_cast<uint8_t>(rng());
    const std::vector<std::vector<uint8_t>> planes = {
        {7}, {0, 255}, std::vector<uint8_t>(300, 127), {0, 255, 0, 255, 128, 1, 254, 127, 126},
        nv_scales(3, 200, 1), mx_scales(4608, 12, 2), any,
    };
    const std::vector<std::vector<uint64_t>> shapes = {{}, {4608}, {3, 200}, {64, 1}, {0}, {1, 9216}};
    for (const auto& plane : planes)
        for (const auto& shape : shapes)
            for (uint64_t offset : {uint64_t{0}, uint64_t{4096}, uint64_t{12345}})
                for (DType t : {DType::U8, DType::F8_E8M0, DType::F8_E4M3}) {
                    const TensorLayout layout{shape, offset, t, {}, true};
                    const auto payload = encode_with(Codec::scale_mix, plane, 3, layout);
                    std::vector<uint8_t> out(plane.size(), 0xAA);
                    decode_plane(Codec::scale_mix, payload, out, layout);
                    ASSERT_EQ(out, plane) << "plane of " << plane.size() << " at offset " << offset;
                }
}

TEST(ScaleMix, MarkedScaleTensorsCodeBelowTheirOrderZeroBound) {
    struct Case {
        std::vector<uint8_t> scales;
        std::vector<uint64_t> shape;
        DType dtype;
    };
    const std::vector<Case> cases = {
        {nv_scales(3, 768, 4), {3, 768}, DType::F8_E4M3},
        {nv_scales(64, 36, 5), {64, 36}, DType::F8_E4M3},
        {mx_scales(4608, 12, 6), {4608}, DType::U8},  // the row is found, not read from the shape
    };
    // An archive level's coder: the default level keeps the faster ones.
    EncodeOptions archive;
    archive.level = kContextModelLevel;
    for (const auto& c : cases) {
        const TensorLayout layout{c.shape, 0, c.dtype, {}, true};
        EXPECT_NE(encode_plane(c.scales, {}, &layout).codec, Codec::scale_mix) << c.scales.size();
        const auto coded = encode_plane(c.scales, archive, &layout);
        // scale-mix, or at these levels f8-model where it does better on E4M3 scales.
        EXPECT_TRUE(coded.codec == Codec::scale_mix || coded.codec == Codec::f8_model) << c.scales.size();
        EXPECT_LT(static_cast<double>(coded.payload.size()), order0_bits(c.scales) / 8) << c.scales.size();
        std::vector<uint8_t> out(c.scales.size());
        decode_plane(coded.codec, coded.payload, out, layout);
        EXPECT_EQ(out, c.scales);
    }
}

// FP8 weights and unmarked bytes never try it: their stores stay as before.
TEST(ScaleMix, IsOnlyTriedOnMarkedScaleTensors) {
    EncodeOptions archive;  // the levels that try it at all
    archive.level = kContextModelLevel;
    const auto scales = nv_scales(3, 768, 7);
    const std::vector<uint64_t> shape = {3, 768};
    for (DType t : {DType::U8, DType::F8_E4M3, DType::F8_E8M0}) {
        const TensorLayout layout{shape, 0, t, {}, false};
        EXPECT_NE(encode_plane(scales, archive, &layout).codec, Codec::scale_mix);
    }
    // Nor on a chunk of a larger scale tensor (large models' scales keep the
    // faster decoders): not the whole tensor, or not from its start.
    const std::vector<uint64_t> larger = {6, 768};
    for (uint64_t offset : {uint64_t{0}, uint64_t{2304}}) {
        const TensorLayout layout{larger, offset, DType::F8_E4M3, {}, true};
        EXPECT_NE(encode_plane(scales, archive, &layout).codec, Codec::scale_mix) << offset;
    }
}

TEST(ScaleMix, DamagedPayloadsAreErrorsOrWrongBytesNeverACrash) {
    const auto scales = nv_scales(3, 300, 8);
    const std::vector<uint64_t> shape = {3, 300};
    const TensorLayout layout{shape, 0, DType::F8_E4M3, {}, true};
    const auto good = encode_with(Codec::scale_mix, scales, 3, layout);
    std::vector<uint8_t> out(scales.size());
    // The first raw bits: mode 3 does not exist.
    EXPECT_THROW(decode_plane(Codec::scale_mix, std::vector<uint8_t>{0xC0, 0, 0, 0}, out, layout), CorruptData);
    // m - 1 = 3: more low bits than a byte's E4M3 mantissa has.
    EXPECT_THROW(decode_plane(Codec::scale_mix, std::vector<uint8_t>{0x38, 0, 0, 0}, out, layout), CorruptData);
    // Mode 2 with an endless Elias-gamma row length, and with a row of 2^20.
    EXPECT_THROW(decode_plane(Codec::scale_mix, std::vector<uint8_t>{0x8F, 0xFF, 0xFF, 0xFF, 0xFF}, out, layout),
                 CorruptData);
    // 10 0 0 | 20 ones, a zero, 20 zero bits: row 2^20, longer than the plane.
    EXPECT_THROW(decode_plane(Codec::scale_mix, std::vector<uint8_t>{0x8F, 0xFF, 0xFF, 0x80, 0, 0, 0}, out, layout),
                 CorruptData);
    // Every truncation and flipped byte: CorruptData or bytes of the right
    // length (the range coder reads zeros past its end; the chunk's checksum
    // catches wrong bytes), under ASan too.
    auto decode = [&](std::span<const uint8_t> p) {
        std::vector<uint8_t> o(scales.size());
        try {
            decode_plane(Codec::scale_mix, p, o, layout);
        } catch (const CorruptData&) {
        }
    };
    for (size_t len = 0; len < good.size(); ++len) decode(std::span(good).first(len));
    for (size_t at = 0; at < good.size(); ++at) {
        auto bad = good;
        bad[at] ^= 0xFF;
        decode(bad);
    }
    // Empty planes and a payload for a one-byte plane.
    std::vector<uint8_t> none;
    decode_plane(Codec::scale_mix, {}, none, layout);
    std::vector<uint8_t> one(1);
    decode_plane(Codec::scale_mix, std::vector<uint8_t>{0x12, 0x34}, one, layout);
}

}  // namespace
}  // namespace ptwm
