// Every decomposition must be exactly invertible, whatever the bytes: edge
// floats, NaN payloads, odd element counts, empty input.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "ptwm/planes/decomposition.hpp"
#include "ptwm/planes/dtype.hpp"

namespace ptwm {
namespace {

const Decomposition kAll[] = {Decomposition::stream,          Decomposition::split2,
                              Decomposition::split4,          Decomposition::split8,
                              Decomposition::bf16_exponent,   Decomposition::f32_exponent,
                              Decomposition::f8e4m3_exponent, Decomposition::f8e5m2_exponent,
                              Decomposition::nibble_split};

std::vector<uint8_t> round_trip(Decomposition d, const std::vector<uint8_t>& in) {
    std::vector<std::vector<uint8_t>> planes(plane_count(d));
    std::vector<uint8_t*> w;
    std::vector<const uint8_t*> r;
    for (unsigned p = 0; p < plane_count(d); ++p) {
        planes[p].resize(plane_length(d, in.size(), p));
        w.push_back(planes[p].data());
        r.push_back(planes[p].data());
    }
    split(d, in, w);
    std::vector<uint8_t> out(in.size());
    merge(d, r, out);
    return out;
}

TEST(Decomposition, RandomBytesRoundTripForEveryDecompositionAndLength) {
    std::mt19937 rng(7);
    for (Decomposition d : kAll) {
        for (size_t elements : {0u, 1u, 2u, 3u, 7u, 64u, 1001u}) {
            std::vector<uint8_t> in(elements * element_bytes(d));
            for (auto& b : in) b = static_cast<uint8_t>(rng());
            EXPECT_EQ(round_trip(d, in), in) << name(d) << " with " << elements << " elements";
        }
    }
}

TEST(Decomposition, EveryByteValueRoundTripsThroughTheFp8Reorders) {
    std::vector<uint8_t> all(256);
    for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
    for (Decomposition d : {Decomposition::f8e4m3_exponent, Decomposition::f8e5m2_exponent, Decomposition::nibble_split})
        EXPECT_EQ(round_trip(d, all), all) << name(d);
}

TEST(Decomposition, EdgeFloatsRoundTrip) {
    // ±0, smallest subnormals, ±inf, quiet and signalling NaNs with payloads, max finite.
    const uint32_t f32[] = {0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F800000, 0xFF800000,
                            0x7FC00001, 0xFFA12345, 0x7F7FFFFF, 0x3F800000, 0xBF800000};
    std::vector<uint8_t> in(sizeof f32);
    std::memcpy(in.data(), f32, sizeof f32);
    EXPECT_EQ(round_trip(Decomposition::f32_exponent, in), in);
    const uint16_t bf16[] = {0x0000, 0x8000, 0x0001, 0x807F, 0x7F80, 0xFF80, 0x7FC1, 0xFFA1, 0x7F7F, 0x3F80, 0xBF80};
    std::vector<uint8_t> in16(sizeof bf16);
    std::memcpy(in16.data(), bf16, sizeof bf16);
    EXPECT_EQ(round_trip(Decomposition::bf16_exponent, in16), in16);
}

TEST(Decomposition, ReorderPutsTheExponentInItsOwnPlane) {
    // 1.0f = 0x3F800000: exponent 127. -1.0f differs only in the sign, so the
    // exponent plane must be the same for both.
    const float values[] = {1.0f, -1.0f};
    std::vector<uint8_t> in(sizeof values);
    std::memcpy(in.data(), values, sizeof values);
    std::vector<uint8_t> p0(2), p1(2), p2(2), p3(2);
    uint8_t* planes[] = {p0.data(), p1.data(), p2.data(), p3.data()};
    split(Decomposition::f32_exponent, in, planes);
    EXPECT_EQ(p3[0], 127);
    EXPECT_EQ(p3[1], 127);
    EXPECT_EQ(p2[0] & 0x80, 0);
    EXPECT_EQ(p2[1] & 0x80, 0x80);

    // FP8 E4M3: 0xB8 = [1 0111 000] (-1.0): exponent nibble 0111, sign below it.
    const std::vector<uint8_t> f8 = {0xB8};
    std::vector<uint8_t> hi(1), lo(1);
    uint8_t* nib[] = {hi.data(), lo.data()};
    split(Decomposition::f8e4m3_exponent, f8, nib);
    EXPECT_EQ(hi[0] & 0x0F, 0x7);
    EXPECT_EQ(lo[0] & 0x0F, 0x8);
}

TEST(DType, TableCoversEverySafetensorsDtype) {
    for (const char* n : {"BOOL", "U8", "I8", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "I16", "U16", "F16", "BF16", "I32",
                          "U32", "F32", "I64", "U64", "F64", "C64", "F6_E2M3", "F6_E3M2"}) {
        const auto d = parse_dtype(n);
        ASSERT_TRUE(d) << n;
        EXPECT_EQ(dtype_info(*d).name, n);
        EXPECT_FALSE(dtype_info(*d).candidates.empty());
    }
    EXPECT_FALSE(parse_dtype("F12"));
    EXPECT_EQ(tensor_bytes(DType::F4, 6), 3u);
    EXPECT_FALSE(tensor_bytes(DType::F4, 5));
    EXPECT_EQ(tensor_bytes(DType::F6_E3M2, 32), 24u);
    EXPECT_FALSE(tensor_bytes(DType::F6_E2M3, 6)) << "36 bits are not whole bytes";
    EXPECT_FALSE(tensor_bytes(DType::F6_E2M3, UINT64_MAX / 4));
    EXPECT_FALSE(tensor_bytes(DType::F64, UINT64_MAX / 4));
}

}  // namespace
}  // namespace ptwm
