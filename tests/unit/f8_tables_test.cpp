// Codec 9, f8-tables: exact round trips under every choice the encoder can
// make, its choice beating the order-0 bound where columns differ in scale,
// and damaged payloads failing as CorruptData.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "codecs/f8_tables.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/codecs/codec.hpp"

namespace ptwm {
namespace {

// The E4M3 byte nearest to v (round half away; no NaN produced).
uint8_t to_e4m3(float v) {
    const uint8_t sign = std::signbit(v) ? 0x80 : 0;
    float a = std::fabs(v);
    if (a >= 448.f) return sign | 0x7E;
    uint8_t best = 0;
    float best_err = a;
    for (unsigned b = 1; b < 0x7F; ++b) {
        const unsigned e = b >> 3, m = b & 7;
        const float x = e ? std::ldexp(1.f + m / 8.f, static_cast<int>(e) - 7) : std::ldexp(m / 8.f, -6);
        if (std::fabs(x - a) < best_err) best_err = std::fabs(x - a), best = static_cast<uint8_t>(b);
    }
    return sign | best;
}

// An FP8 kernel [rows, cols] whose columns have scales spread over 16x, as
// output channels of a trained layer do, quantised with one tensor scale.
std::vector<uint8_t> fp8_kernel(size_t rows, size_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0, 1);
    std::vector<float> col_scale(cols);
    for (auto& s : col_scale) s = std::exp2(4.f * static_cast<float>(rng() % 1000) / 1000.f);
    std::vector<float> w(rows * cols);
    float absmax = 0;
    for (size_t i = 0; i < w.size(); ++i) absmax = std::max(absmax, std::fabs(w[i] = normal(rng) * col_scale[i % cols]));
    std::vector<uint8_t> out(w.size());
    for (size_t i = 0; i < w.size(); ++i) out[i] = to_e4m3(w[i] / absmax * 448.f);
    return out;
}

void expect_round_trip(std::span<const uint8_t> in, const std::vector<uint8_t>& payload, const char* what) {
    std::vector<uint8_t> out(in.size(), 0xAA);
    f8tables::decode(payload, out);
    ASSERT_TRUE(std::equal(out.begin(), out.end(), in.begin(), in.end())) << what;
}

TEST(F8Tables, EveryChoiceRoundTripsAtAnyOffsetAndLength) {
    const auto kernel = fp8_kernel(97, 64, 1);
    std::vector<uint8_t> any(3001);
    std::mt19937 rng(2);
    for (auto& b : any) b = static_cast<uint8_t>(rng());  // every byte value, NaN patterns included
    const std::vector<uint64_t> shape = {97, 64}, odd = {3001}, none = {};
    for (const auto& [bytes, sh] : {std::pair{std::span<const uint8_t>(kernel), shape},
                                    std::pair{std::span<const uint8_t>(any), odd},
                                    std::pair{std::span<const uint8_t>(any), none}})
        for (size_t len : {size_t{0}, size_t{1}, size_t{3}, size_t{5}, size_t{1000}, bytes.size()})
            for (uint64_t offset : {uint64_t{0}, uint64_t{13}})
                for (unsigned log2k = 0; log2k <= 3; ++log2k)
                    for (unsigned prec : {10u, 12u, 15u})
                        for (bool signs : {false, true})
                            for (bool wide : {false, true}) {
                                if (signs && wide) continue;  // not a layout: the encoder refuses it
                                const auto in = bytes.subspan(offset, std::min(len, bytes.size() - offset));
                                const TensorLayout layout{sh, offset, DType::F8_E4M3, {}};
                                expect_round_trip(in, f8tables::encode_with(in, layout, {log2k, prec, signs, wide}),
                                                  wide ? "forced choice, 32 states" : "forced choice");
                            }
    for (size_t len : {size_t{1}, size_t{7}, kernel.size()}) {
        const auto in = std::span<const uint8_t>(kernel).first(len);
        expect_round_trip(in, f8tables::encode(in, {shape, 0, DType::F8_E4M3, {}}), "encoder's choice");
    }
}

TEST(F8Tables, ColumnsOfDifferentScaleCodeBelowTheOrder0Bound) {
    // The bound no order-0 coder (rANS included) can beat: the contest must
    // pick f8-tables and land under it.
    const auto kernel = fp8_kernel(512, 128, 3);
    const std::vector<uint64_t> shape = {512, 128};
    const TensorLayout layout{shape, 0, DType::F8_E4M3, {}};
    const auto coded = encode_plane(kernel, {}, &layout);
    EXPECT_EQ(coded.codec, Codec::f8_tables);
    const double bound = order0_bits(kernel) / 8;
    EXPECT_LT(static_cast<double>(coded.payload.size()), 0.99 * bound);
    std::vector<uint8_t> out(kernel.size());
    decode_plane(coded.codec, coded.payload, out);  // no layout needed
    EXPECT_EQ(out, kernel);
}

// The wide layout (32 states, decoded 32 bytes a round with SIMD where the
// CPU has it, byte by byte near the payload's end and elsewhere): a kernel
// large enough for many rounds, every class count, and the encoder's own
// choice, which takes it from 128 KiB.
TEST(F8Tables, WideLayoutRoundTripsAndIsTheEncodersChoiceForLargeChunks) {
    const auto kernel = fp8_kernel(1400, 96, 6);
    const std::vector<uint64_t> shape = {1400, 96};
    for (bool simd : {true, false}) {
        f8tables::allow_simd(simd);
        for (uint64_t offset : {uint64_t{0}, uint64_t{5}, uint64_t{96 * 7 + 40}})
            for (unsigned log2k = 0; log2k <= 3; ++log2k)
                for (unsigned prec : {10u, 15u}) {
                    const auto in = std::span<const uint8_t>(kernel).subspan(offset);
                    expect_round_trip(in, f8tables::encode_with(in, {shape, offset, DType::F8_E4M3, {}}, {log2k, prec, false, true}),
                                      simd ? "wide" : "wide, byte by byte");
                }
    }
    f8tables::allow_simd(true);
    const TensorLayout layout{shape, 0, DType::F8_E4M3, {}};
    const auto chosen = f8tables::encode(kernel, layout);
    EXPECT_EQ(chosen[0] & 8, 8) << "a 131 KiB chunk is coded with 32 states";
    expect_round_trip(kernel, chosen, "encoder's choice");
    // 32 states cost 112 bytes more than 4, nothing else.
    const auto narrow = f8tables::encode_with(kernel, layout, {chosen[0] & 3u, chosen[1], false, false});
    EXPECT_LE(chosen.size(), narrow.size() + 112 + 2);
    // Coded signs are not part of the wide layout.
    auto bad = chosen;
    bad[0] |= 4;
    std::vector<uint8_t> out(kernel.size());
    EXPECT_THROW(f8tables::decode(bad, out), CorruptData);
    // Cut anywhere: refused.
    for (size_t cut = 0; cut < chosen.size(); cut += 97) {
        const std::vector<uint8_t> part(chosen.begin(), chosen.begin() + static_cast<std::ptrdiff_t>(cut));
        EXPECT_THROW(f8tables::decode(part, out), CorruptData) << "cut at " << cut;
    }
}

// E5M2 kernels take the same tables: any byte is a magnitude and a sign.
TEST(F8Tables, E5M2ColumnsOfDifferentScaleCodeBelowTheOrder0BoundToo) {
    auto kernel = fp8_kernel(512, 128, 7);
    // E4M3 -> E5M2 by value would need rounding; bytes of a like shape do:
    // [S EEEE MMM] -> [S EEEEE MM] with the exponent rebiased (+8).
    for (auto& b : kernel) {
        const unsigned e = (b >> 3) & 15, m = b & 7;
        b = static_cast<uint8_t>((b & 0x80) | std::min(30u, e + 8) << 2 | m >> 1);
    }
    const std::vector<uint64_t> shape = {512, 128};
    const TensorLayout layout{shape, 0, DType::F8_E5M2, {}};
    const auto coded = encode_plane(kernel, {}, &layout);
    EXPECT_EQ(coded.codec, Codec::f8_tables);
    EXPECT_LT(static_cast<double>(coded.payload.size()), order0_bits(kernel) / 8);
    std::vector<uint8_t> out(kernel.size());
    decode_plane(coded.codec, coded.payload, out);
    EXPECT_EQ(out, kernel);
}

TEST(F8Tables, DamagedPayloadsAreCorruptDataNeverACrash) {
    const auto kernel = fp8_kernel(64, 32, 4);
    const std::vector<uint64_t> shape = {64, 32};
    const auto good = f8tables::encode_with(kernel, {shape, 0, DType::F8_E4M3, {}}, {2, 12, true});
    std::vector<uint8_t> out(kernel.size());
    // Cut anywhere: always refused (the stream must end exactly where it began).
    for (size_t cut = 0; cut < good.size(); cut += 7) {
        const std::vector<uint8_t> part(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut));
        EXPECT_THROW(f8tables::decode(part, out), CorruptData) << "cut at " << cut;
    }
    // Every byte flipped: refused or decoded to other bytes, never a crash.
    for (size_t at = 0; at < good.size(); ++at) {
        auto bad = good;
        bad[at] ^= 0x5A;
        try {
            f8tables::decode(bad, out);
        } catch (const CorruptData&) {
        }
    }
    auto flags = good;
    flags[0] |= 0x10;
    EXPECT_THROW(f8tables::decode(flags, out), CorruptData);
    auto prec = good;
    prec[1] = 16;
    EXPECT_THROW(f8tables::decode(prec, out), CorruptData);
}

}  // namespace
}  // namespace ptwm
