// srans::normalize turns a table's codes into frequencies in every decoder,
// chunk after chunk, so it is written for speed; its result is part of the
// store format (an encoder and every later decoder must get the same
// frequencies from the same codes). Here it is held to the rule as its
// comment states it, written plainly: each present symbol gets
// max(1, round(a 2^prec / sum a)), a = 2^16 2^((code - 1) / 4); what that
// leaves over or under 2^prec is dealt out one unit at a time to the
// present symbols in order of frequency, largest first, ties to the smaller
// symbol, round after round, never taking a symbol below 1.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "codecs/static_rans.hpp"

namespace ptwm {
namespace {

// The rule's first cut: each present symbol's weight, rounded, at least 1.
std::vector<uint32_t> rounded_weights(const std::vector<uint8_t>& code, unsigned prec) {
    static constexpr uint64_t kQuarter[4] = {65536, 77936, 92682, 110218};
    const auto weight = [](unsigned c) { return kQuarter[(c - 1) & 3] << ((c - 1) >> 2); };
    const uint64_t total = uint64_t{1} << prec;
    uint64_t sum = 0;
    for (uint8_t c : code)
        if (c) sum += weight(c);
    std::vector<uint32_t> freq(code.size(), 0);
    for (unsigned s = 0; s < code.size(); ++s)
        if (code[s]) freq[s] = static_cast<uint32_t>(std::max<uint64_t>(1, (weight(code[s]) * total + sum / 2) / sum));
    return freq;
}

// What the first cut leaves over (> 0) or under (< 0) 2^prec.
int64_t remainder(const std::vector<uint32_t>& freq, unsigned prec) {
    return (int64_t{1} << prec) - std::accumulate(freq.begin(), freq.end(), int64_t{0});
}

std::vector<uint32_t> by_the_rule(const std::vector<uint8_t>& code, unsigned prec) {
    std::vector<uint32_t> freq = rounded_weights(code, prec);
    std::vector<unsigned> order;
    for (unsigned s = 0; s < code.size(); ++s)
        if (code[s]) order.push_back(s);
    std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) { return freq[a] > freq[b]; });
    for (int64_t diff = remainder(freq, prec), k = 0; diff != 0; k = (k + 1) % static_cast<int64_t>(order.size())) {
        uint32_t& f = freq[order[static_cast<size_t>(k)]];
        if (diff > 0) ++f, --diff;
        else if (f > 1) --f, ++diff;
    }
    return freq;
}

TEST(StaticRansNormalize, FollowsTheRuleForAnyCodes) {
    std::mt19937 rng(13);
    size_t over = 0, under = 0, many_ones = 0;
    for (int round = 0; round < 20000; ++round) {
        const unsigned alphabet = std::array{2u, 16u, 128u, 256u}[rng() % 4];
        const unsigned prec = srans::kMinPrec + rng() % (srans::kMaxPrec - srans::kMinPrec + 1);
        const unsigned max_code = 4 * prec + 1;
        // Present symbols: all, a few, or a run; codes spread wide, or most
        // of them low (many symbols at frequency 1: decrements that skip them).
        std::vector<uint8_t> code(alphabet, 0);
        const unsigned shape = rng() % 3, spread = rng() % 3;
        const unsigned lo = rng() % alphabet, hi = lo + rng() % (alphabet - lo);
        for (unsigned s = 0; s < alphabet; ++s) {
            const bool present = shape == 0 || (shape == 1 && rng() % 8 == 0) || (shape == 2 && s >= lo && s <= hi);
            if (!present) continue;
            code[s] = static_cast<uint8_t>(spread == 0   ? 1 + rng() % max_code
                                           : spread == 1 ? 1 + rng() % 6
                                                         : (rng() % 4 ? 1 + rng() % 3 : max_code - rng() % 8));
        }
        if (std::all_of(code.begin(), code.end(), [](uint8_t c) { return c == 0; })) code[rng() % alphabet] = 1;
        srans::Table t;
        t.alphabet = alphabet;
        t.code = code;
        ASSERT_TRUE(srans::normalize(t, prec)) << "round " << round;
        const auto expected = by_the_rule(code, prec);
        ASSERT_EQ(t.freq, expected) << "round " << round << ", alphabet " << alphabet << ", prec " << prec;
        uint32_t c = 0;
        for (unsigned s = 0; s < alphabet; ++s) {
            ASSERT_EQ(t.cum[s], c);
            c += t.freq[s];
        }
        ASSERT_EQ(c, 1u << prec);
        // Which ways the remainder went, so that every path is known taken.
        const auto cut = rounded_weights(code, prec);
        const int64_t first_cut = remainder(cut, prec);
        const auto ones = static_cast<uint64_t>(std::count(cut.begin(), cut.end(), 1u));
        over += first_cut < 0;
        under += first_cut > 0;
        const uint64_t present = static_cast<uint64_t>(std::count_if(code.begin(), code.end(), [](uint8_t k) { return k; }));
        many_ones += first_cut < 0 && static_cast<uint64_t>(-first_cut) > present - ones;
    }
    // Every way the remainder is dealt was taken, many times.
    EXPECT_GT(over, 1000u);
    EXPECT_GT(under, 1000u);
    EXPECT_GT(many_ones, 50u);
}

}  // namespace
}  // namespace ptwm
