#include <gtest/gtest.h>

#include "ptwm/base/size_text.hpp"

namespace ptwm {
namespace {

TEST(SizeText, NumbersWithBinarySuffixes) {
    EXPECT_EQ(parse_size("4096"), 4096u);
    EXPECT_EQ(parse_size("256K"), 256u << 10);
    EXPECT_EQ(parse_size("256m"), 256u << 20);
    EXPECT_EQ(parse_size("2G"), 2ull << 30);
    EXPECT_EQ(parse_size("0"), 0u);
}

TEST(SizeText, TheLargestValuesAreTaken) {
    EXPECT_EQ(parse_size("18446744073709551615"), UINT64_MAX);
    EXPECT_EQ(parse_size("17179869183G"), 17179869183ull << 30);
    EXPECT_FALSE(parse_size("18446744073709551616"));
    EXPECT_FALSE(parse_size("18446744073709551620"));
    EXPECT_FALSE(parse_size("17179869184G"));
}

TEST(SizeText, AnythingElseIsRefused) {
    for (const char* bad : {"", "K", "12Q", "-1", "1.5G", " 1", "99999999999999999999", "17179869184G"})
        EXPECT_FALSE(parse_size(bad)) << bad;
}

}  // namespace
}  // namespace ptwm
