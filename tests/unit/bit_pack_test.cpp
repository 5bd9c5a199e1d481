// Frame-of-reference bit packing (codec 13, bit-pack): the contest's
// starting point for planes too small for an entropy coder.
#include "codecs/bit_pack.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "damaged_input.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/codecs/codec.hpp"

namespace ptwm {
namespace {

// n bytes drawn from base .. base + 2^width - 1, clipped at 255, with the
// smallest and the largest both present (so the width is the one asked for
// wherever the clip leaves room).
std::vector<uint8_t> narrow_bytes(size_t n, uint8_t base, unsigned width, uint32_t seed) {
    std::mt19937 rng(seed);
    const unsigned top = std::min(255u, base + (1u << width) - 1);
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(base + rng() % (top - base + 1));
    if (n >= 2) v[0] = base, v[n - 1] = static_cast<uint8_t>(top);
    return v;
}

TEST(BitPack, RoundTripsEveryWidthAndLengthAndItsSizeIsKnownFromTheHistogram) {
    // Lengths around the decoder's switch from whole-word loads to its
    // padded tail (payloads of 8 bytes and more).
    for (unsigned width = 1; width <= 8; ++width)
        for (size_t n : {2, 3, 7, 8, 9, 15, 16, 17, 31, 63, 64, 65, 100, 1000, 4099})
            for (uint8_t base : {0, 117, 250}) {
                const auto plane = narrow_bytes(n, base, width, static_cast<uint32_t>(n * 9 + width));
                const auto payload = bit_pack::encode(plane);
                Histogram h{};
                add_to_histogram(plane, h);
                EXPECT_EQ(bit_pack::encoded_size(h, n), payload.size()) << "width " << width << ", n " << n;
                std::vector<uint8_t> out(n, 0xAA);
                decode_plane(Codec::bit_pack, payload, out);
                ASSERT_EQ(out, plane) << "width " << width << ", n " << n << ", base " << int{base};
            }
}

TEST(BitPack, AConstantOrEmptyPlaneHasNoPackedSize) {
    Histogram h{};
    EXPECT_EQ(bit_pack::encoded_size(h, 0), 0u);
    add_to_histogram(std::vector<uint8_t>(40, 9), h);
    EXPECT_EQ(bit_pack::encoded_size(h, 40), 0u);  // the constant codec's case
}

TEST(BitPack, DamagedPayloadsAreCorruptDataThatSayWhatIsWrong) {
    std::vector<uint8_t> out(16);
    const auto good = bit_pack::encode(narrow_bytes(16, 120, 3, 1));  // 2 + 6 bytes
    using damaged::expect_error;
    expect_error<CorruptData>([&] { decode_plane(Codec::bit_pack, std::vector<uint8_t>{120}, out); },
                              {"bit-packed plane", "shorter than its header"});
    for (uint8_t width : {0, 9, 255}) {
        auto bad = good;
        bad[1] = width;
        expect_error<CorruptData>([&] { decode_plane(Codec::bit_pack, bad, out); },
                                  {"width " + std::to_string(width) + " is not 1 to 8"});
    }
    auto longer = good, shorter = good;
    longer.push_back(0);
    shorter.pop_back();
    for (const auto& bad : {longer, shorter})
        expect_error<CorruptData>([&] { decode_plane(Codec::bit_pack, bad, out); },
                                  {std::to_string(bad.size() - 2) + " bytes of bits where 16 values of 3 bits take 6"});
}

TEST(BitPack, TheContestTakesItOnSmallNarrowPlanesAndNotWhereACoderWinsByItsMargin) {
    EncodeOptions opt;
    // A bias's exponent plane: 40 values over 8 neighbouring exponents, 3
    // bits each (17 bytes); the adaptive coder needs about as much with its
    // learning, and decodes some thirty times slower.
    const auto bias = narrow_bytes(40, 118, 3, 2);
    const auto small = encode_plane(bias, opt);
    EXPECT_EQ(small.codec, Codec::bit_pack) << name(small.codec);
    EXPECT_EQ(small.payload.size(), 17u);
    std::vector<uint8_t> out(bias.size());
    decode_plane(small.codec, small.payload, out);
    EXPECT_EQ(out, bias);
    // 4 KiB of one value but for every 13th byte, which spans 16 values: 4
    // bits a byte packed, under one coded -- an entropy coder wins by far
    // more than its margin.
    std::vector<uint8_t> skewed(4096, 107);
    const auto spread = narrow_bytes(skewed.size() / 13 + 1, 100, 4, 3);
    for (size_t i = 0; i < skewed.size(); i += 13) skewed[i] = spread[i / 13];
    const auto coded = encode_plane(skewed, opt);
    EXPECT_NE(coded.codec, Codec::bit_pack) << name(coded.codec);
}

}  // namespace
}  // namespace ptwm
