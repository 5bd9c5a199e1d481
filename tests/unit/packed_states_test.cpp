// The packed final states of the static rANS streams (f8-tables flag 128,
// fp4-tables flag 8): every state the coder can end in comes back, the
// packing is smaller than four bytes a state, and a stream too short for
// its states is refused.
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <vector>

#include "codecs/static_rans.hpp"
#include "ptwm/base/error.hpp"

namespace ptwm {
namespace {

template <size_t Lanes>
std::array<uint32_t, Lanes> spread_states(uint32_t seed) {
    // Spread as a coder's are, about as 1/x over [2^15, 2^31), with both ends.
    std::mt19937 rng(seed);
    std::array<uint32_t, Lanes> x;
    for (auto& s : x) {
        const unsigned bits = 15 + rng() % 16;
        s = (1u << bits) | (rng() & ((1u << bits) - 1));
    }
    x[0] = srans::kLow;
    x[Lanes - 1] = (srans::kLow << 16) - 1;
    return x;
}

template <size_t Lanes>
void expect_round_trip(uint32_t seed) {
    const auto x = spread_states<Lanes>(seed);
    std::vector<uint8_t> bytes;
    srans::put_packed_states(x, bytes);
    // (Spread as a coder's; states from 2^30 up alone would take 4.25 bytes.)
    EXPECT_LT(bytes.size(), 4 * Lanes) << Lanes << " states";
    const std::vector<uint8_t> words = {1, 2, 3};  // what follows the states in a stream
    bytes.insert(bytes.end(), words.begin(), words.end());
    srans::DecodeState<Lanes> d(bytes, srans::States::packed);
    EXPECT_EQ(d.x, x);
    EXPECT_EQ(d.end - d.p, 3) << "the words start right after the states";
    // Every cut short of the states is refused.
    for (size_t cut = 0; cut + words.size() < bytes.size(); ++cut)
        EXPECT_THROW((srans::DecodeState<Lanes>(std::span(bytes).first(cut), srans::States::packed)), CorruptData)
            << "cut at " << cut;
}

// The bytes ptwmfs-store(5) gives as its example: nibbles 0, 15, 1, 1;
// then 15 zero bits, 30 one bits, the 16 bits of 0x2345 and 0x8000's 16,
// least significant first, and a zero bit of padding.
TEST(PackedStates, AreTheBytesTheFormatSpecifies) {
    const std::array<uint32_t, 4> x = {1u << 15, (1u << 31) - 1, 0x12345, 3u << 15};
    std::vector<uint8_t> bytes;
    srans::put_packed_states(x, bytes);
    EXPECT_EQ(bytes, (std::vector<uint8_t>{0xf0, 0x11, 0x00, 0x80, 0xff, 0xff, 0xff, 0xbf, 0x68, 0x04, 0x00, 0x10}));
    srans::DecodeState<4> d(bytes, srans::States::packed);
    EXPECT_EQ(d.x, x);
    // An encoder never ends outside [2^15, 2^31); asked to write such a state it refuses.
    for (uint32_t bad : {0u, (1u << 15) - 1, 1u << 31}) {
        auto y = x;
        y[2] = bad;
        std::vector<uint8_t> out;
        EXPECT_THROW(srans::put_packed_states(y, out), Error) << bad;
    }
}

TEST(PackedStates, RoundTripInEveryLaneCount) {
    for (uint32_t seed = 1; seed <= 20; ++seed) {
        expect_round_trip<4>(seed);
        expect_round_trip<32>(seed);
        expect_round_trip<64>(seed);
    }
}

TEST(PackedStates, CostAboutThreeAndAHalfBitsAboveTheStatesOwn) {
    // 64 states spread as 1/x: four bytes each is 256 bytes; packed, each
    // costs its bit length plus 3 (nibble less the leading one), about 28
    // bits on average.
    double own = 0;
    size_t packed = 0;
    for (uint32_t seed = 1; seed <= 50; ++seed) {
        const auto x = spread_states<64>(seed);
        for (uint32_t s : x) own += std::log2(static_cast<double>(s));
        std::vector<uint8_t> bytes;
        srans::put_packed_states(x, bytes);
        packed += bytes.size();
    }
    const double per_state = 8.0 * static_cast<double>(packed) / (50 * 64) - own / (50 * 64);
    EXPECT_GT(per_state, 3.0);
    EXPECT_LT(per_state, 4.0);
}

}  // namespace
}  // namespace ptwm
