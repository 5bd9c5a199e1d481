// srans::log2_of_frequency, filled entry by entry as first asked for: every
// entry must be the value the table it replaced computed up front
// (cost_bits ranks tables by it, and a different value could choose a
// different table, so different store bytes), whichever thread asks first.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "codecs/static_rans.hpp"

namespace ptwm {
namespace {

TEST(Log2OfFrequency, IsTheFloatOfStdLog2ForEveryFrequency) {
    // Two threads fill the table at once, in opposite orders.
    std::vector<float> up((1u << srans::kMaxPrec) + 1), down(up.size());
    std::thread other([&] {
        for (uint32_t f = static_cast<uint32_t>(down.size()) - 1; f >= 1; --f) down[f] = srans::log2_of_frequency(f);
    });
    for (uint32_t f = 1; f < up.size(); ++f) up[f] = srans::log2_of_frequency(f);
    other.join();
    for (uint32_t f = 1; f < up.size(); ++f) {
        const float expected = static_cast<float>(std::log2(static_cast<double>(f)));
        ASSERT_EQ(up[f], expected) << f;
        ASSERT_EQ(down[f], expected) << f;
        ASSERT_EQ(srans::log2_of_frequency(f), expected) << f;
    }
}

}  // namespace
}  // namespace ptwm
