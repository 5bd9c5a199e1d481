// UTF-8 as a JSON writer demands it: what is_utf8 accepts, nlohmann's dump
// must accept too, and printable shows every other byte as \xHH.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "ptwm/base/utf8.hpp"

namespace ptwm {
namespace {

using namespace std::string_literals;

TEST(Utf8, WellFormedTextIsAccepted) {
    for (const std::string& ok : {""s, "config.json"s, "caf\xc3\xa9"s, "\xe2\x82\xac"s, "\xf0\x9f\xa4\x97.json"s,
                                 "\xef\xbf\xbd"s, "\xf4\x8f\xbf\xbf"s, "a\0b"s}) {
        EXPECT_TRUE(is_utf8(ok)) << ok;
        EXPECT_NO_THROW(nlohmann::json(ok).dump()) << ok;
    }
}

TEST(Utf8, MalformedTextIsRefusedAsJsonRefusesIt) {
    for (const std::string& bad : {"c\xfe"s, "\xff"s, "\x80"s, "caf\xc3"s, "\xc0\xaf"s /* overlong '/' */,
                                  "\xe0\x80\xaf"s, "\xed\xa0\x80"s /* surrogate */, "\xf4\x90\x80\x80"s /* > U+10FFFF */,
                                  "\xf5\x80\x80\x80"s, "\xe2\x82"s}) {
        EXPECT_FALSE(is_utf8(bad)) << printable(bad);
        EXPECT_THROW(nlohmann::json(bad).dump(), nlohmann::json::type_error) << printable(bad);
    }
}

TEST(Utf8, PrintableEscapesBadBytesAndControlsOnly) {
    EXPECT_EQ(printable("c\xfe.safetensors"), "c\\xfe.safetensors");
    EXPECT_EQ(printable("caf\xc3\xa9/\x1b[31m\x7f"), "caf\xc3\xa9/\\x1b[31m\\x7f");
    EXPECT_EQ(printable("\xe2\x82"), "\\xe2\\x82");  // a sequence cut short: each byte
    // C1 controls (U+009B is CSI) are escaped; the letters after them are not.
    EXPECT_EQ(printable("a\xc2\x9b" "31m\xc2\x80\xc2\x9f\xc2\xa0\xc3\x80"), "a\\xc2\\x9b" "31m\\xc2\\x80\\xc2\\x9f\xc2\xa0\xc3\x80");
    EXPECT_EQ(printable("plain"), "plain");
}

}  // namespace
}  // namespace ptwm
