// Order-2 rANS over small alphabets (codec 12, rans2): byte pairs under
// htscodecs' order-1 coder.
#include "codecs/pair_rans.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "codecs/rans.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/codecs/codec.hpp"

namespace ptwm {
namespace {

std::vector<uint8_t> bytes_from(std::vector<uint8_t> alphabet, size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = alphabet[rng() % alphabet.size()];
    return v;
}

TEST(PairRans, RoundTripsEveryAlphabetSizeAndLength) {
    std::mt19937 rng(1);
    for (unsigned k : {1u, 2u, 7u, 16u}) {
        std::vector<uint8_t> alphabet = {0, 255};
        while (alphabet.size() < k) alphabet.push_back(static_cast<uint8_t>(rng()));
        alphabet.resize(k);
        for (size_t n : {1u, 15u, 16u, 17u, 100u, 5000u, 11200u, 70001u}) {
            const auto plane = bytes_from(alphabet, n, static_cast<uint32_t>(n + k));
            const auto payload = encode_with(Codec::rans2, plane);
            std::vector<uint8_t> out(n, 0xAA);
            decode_plane(Codec::rans2, payload, out);
            EXPECT_EQ(out, plane) << k << " values, " << n << " bytes";
        }
    }
}

TEST(PairRans, IsOnlyForPlanesOfAtMost16Values) {
    std::vector<uint8_t> alphabet(17);
    for (unsigned i = 0; i < 17; ++i) alphabet[i] = static_cast<uint8_t>(100 + i);
    const auto plane = bytes_from(alphabet, 4000, 3);
    EXPECT_FALSE(pair_rans::encode(plane));
    EXPECT_THROW(encode_with(Codec::rans2, plane), Error);
}

// Each value decided by the two before it, but not by the one before it
// alone: order 2 codes it in a few bits where order 1 cannot.
TEST(PairRans, CodesWhatTheTwoBytesBeforeDecide) {
    std::mt19937 rng(5);
    std::vector<uint8_t> plane = {3, 7};
    while (plane.size() < 50000) {
        const uint8_t a = plane[plane.size() - 2], b = plane[plane.size() - 1];
        plane.push_back(rng() % 8 == 0 ? static_cast<uint8_t>(rng() % 4 * 2 + 1) : static_cast<uint8_t>((a * 3 + b) % 8 | 1));
    }
    const auto order2 = encode_with(Codec::rans2, plane), order1 = encode_with(Codec::rans1, plane);
    EXPECT_LT(static_cast<double>(order2.size()), 0.8 * static_cast<double>(order1.size()));
}

TEST(PairRans, DamagedPayloadsAreErrorsOrWrongBytesNeverACrash) {
    std::vector<uint8_t> out(64);
    // The alphabet: empty, too long, out of order, cut short.
    for (const std::vector<uint8_t>& bad : {std::vector<uint8_t>{}, std::vector<uint8_t>{0}, std::vector<uint8_t>{17, 1, 2},
                                            std::vector<uint8_t>{2, 9, 5, 0, 0, 0, 0}, std::vector<uint8_t>{3, 1, 2}})
        EXPECT_THROW(decode_plane(Codec::rans2, bad, out), CorruptData) << bad.size() << " bytes";
    // Pairs a valid rANS stream carries but no plane gives: a rank beyond
    // the alphabet, a pair whose first rank is not the rank before.
    const auto with_pairs = [](std::vector<uint8_t> pairs) {
        std::vector<uint8_t> payload = {2, 5, 9};
        const auto coded = rans::encode(pairs, 1);
        payload.insert(payload.end(), coded.begin(), coded.end());
        return payload;
    };
    std::vector<uint8_t> good(64), outside(64), unfollowed(64);
    for (size_t i = 0; i < 64; ++i) good[i] = static_cast<uint8_t>(i ? (good[i - 1] & 15) << 4 | (i % 3 == 0) : 0);
    outside = good, outside[40] = static_cast<uint8_t>((good[39] & 15) << 4 | 2), outside[41] = 0x20;
    unfollowed = good, unfollowed[40] ^= 0x10;
    std::vector<uint8_t> decoded(64);
    decode_plane(Codec::rans2, with_pairs(good), decoded);
    for (size_t i = 0; i < 64; ++i) EXPECT_EQ(decoded[i], (good[i] & 15) ? 9 : 5) << i;
    EXPECT_THROW(decode_plane(Codec::rans2, with_pairs(outside), decoded), CorruptData);
    EXPECT_THROW(decode_plane(Codec::rans2, with_pairs(unfollowed), decoded), CorruptData);
    // A cut or flipped stream.
    std::vector<uint8_t> alphabet = {118, 119, 120, 121, 122};
    const auto plane = bytes_from(alphabet, 30000, 9);
    const auto payload = encode_with(Codec::rans2, plane);
    std::vector<uint8_t> whole(plane.size());
    for (size_t cut : {payload.size() / 2, payload.size() - 3})
        try {
            decode_plane(Codec::rans2, std::span(payload).first(cut), whole);
            EXPECT_NE(whole, plane) << "cut at " << cut;
        } catch (const CorruptData&) {
        }
    for (size_t at = 6; at < payload.size(); at += payload.size() / 13) {
        auto flipped = payload;
        flipped[at] ^= 0x5A;
        try {
            decode_plane(Codec::rans2, flipped, whole);
        } catch (const CorruptData&) {
        }
    }
}

}  // namespace
}  // namespace ptwm
