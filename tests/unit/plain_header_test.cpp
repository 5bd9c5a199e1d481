// The plain-header scan (store/plain_header.hpp) against the JSON parser:
// every header it takes must come out field for field as the parser reads
// it, and every header it declines must still be read (or refused) by the
// parser, with the parser's words.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ptwm/base/error.hpp"
#include "ptwm/store/safetensors.hpp"
#include "store/plain_header.hpp"

namespace {

std::vector<uint8_t> file_head(const std::string& json) {
    std::vector<uint8_t> b(8 + json.size());
    const uint64_t n = json.size();
    for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(n >> (8 * i));
    std::memcpy(b.data() + 8, json.data(), json.size());
    return b;
}

struct Parsed {
    bool ok = false;
    std::string error;
    ptwm::SafetensorsHeader header;
};

Parsed parse(const std::string& json, uint64_t data_bytes, bool plain_scan) {
    ptwm::allow_plain_header_scan(plain_scan);
    Parsed r;
    const auto head = file_head(json);
    try {
        r.header = ptwm::parse_safetensors(std::span<const uint8_t>(head), head.size() + data_bytes, "f");
        r.ok = true;
    } catch (const ptwm::Error& e) {
        r.error = e.what();
    }
    ptwm::allow_plain_header_scan(true);
    return r;
}

// Both ways, the same header or the same error.
void expect_same(const std::string& json, uint64_t data_bytes) {
    SCOPED_TRACE(json);
    const Parsed fast = parse(json, data_bytes, true), slow = parse(json, data_bytes, false);
    ASSERT_EQ(fast.ok, slow.ok) << fast.error << " / " << slow.error;
    EXPECT_EQ(fast.error, slow.error);
    if (!fast.ok) return;
    EXPECT_EQ(fast.header.metadata_json, slow.header.metadata_json);
    EXPECT_EQ(fast.header.prefix, slow.header.prefix);
    EXPECT_EQ(fast.header.by_name, slow.header.by_name);
    ASSERT_EQ(fast.header.tensors.size(), slow.header.tensors.size());
    for (size_t i = 0; i < fast.header.tensors.size(); ++i) {
        const auto &a = fast.header.tensors[i], &b = slow.header.tensors[i];
        EXPECT_EQ(a.name, b.name);
        EXPECT_EQ(a.dtype, b.dtype);
        EXPECT_EQ(a.shape, b.shape);
        EXPECT_EQ(a.begin, b.begin);
        EXPECT_EQ(a.end, b.end);
    }
}

bool is_plain(const std::string& json) { return ptwm::scan_plain_header(json).has_value(); }

TEST(PlainHeader, TakesTheCommonForm) {
    EXPECT_TRUE(is_plain(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})"));
    EXPECT_TRUE(is_plain(" { \"a\" : { \"shape\" : [ ] , \"data_offsets\" : [ 0 , 1 ] , \"dtype\" : \"U8\" } }  \n"));
    EXPECT_TRUE(is_plain(R"({"__metadata__":{"k":"v \"quoted\" \\ é"},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})"));
    EXPECT_TRUE(is_plain("{}"));
    // String metadata is written out by the scan, as the JSON library dumps it.
    const auto h = ptwm::scan_plain_header(R"({"__metadata__": {"b": "x\"y", "a": "1"}})");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->metadata_json, R"({"a":"1","b":"x\"y"})");
    EXPECT_TRUE(h->metadata.empty());
}

TEST(PlainHeader, DeclinesEverythingElse) {
    for (const char* json : {
             R"({"a\u0062":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",            // an escape in a name
             "{\"\xc3\xa9\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",      // non-ASCII name
             R"({"a":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}})",                  // a float
             R"({"a":{"dtype":"U8","shape":[1e0],"data_offsets":[0,1]}})",
             R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})",
             R"({"a":{"dtype":"U8","shape":[01],"data_offsets":[0,1]}})",                   // a leading zero
             R"({"a":{"dtype":"U8","shape":[12345678901234567890],"data_offsets":[0,1]}})",  // 20 digits
             R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})",
             R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}})",              // another key
             R"({"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})",       // a key twice
             R"({"a":{"dtype":"U8","shape":[1]}})",                                         // a key missing
             R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},})",                   // trailing comma
             R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}} x)",                  // trailing text
             R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]})",                     // unclosed
             R"({"__metadata__":"x"})",                                                     // metadata not an object
             R"({"__metadata__":{"k":"v})",
             R"({"a":[]})",
         })
        EXPECT_FALSE(is_plain(json)) << json;
}

TEST(PlainHeader, ReadsAsTheJsonParserDoes) {
    expect_same(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})",
                12);
    expect_same(R"({"b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                12);
    // Metadata of any JSON, as the parser writes it back.
    expect_same(R"({"__metadata__":{"z":"1","a":"x\"y\\z\n","n":{"q":[1,2.5,-3,true,null]},"u":"\u00e9\ud83d\ude00"},)"
                R"("t":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]}})",
                12);
    // String metadata, which the scan writes out itself: keys in order,
    // the escapes the library writes back as they are, and those it does
    // not (\/, \u), which go to the parser.
    for (const std::string meta : {R"({})", R"({"b":"2","a":"1"})", R"({ "z" : "q\"x\\y\b\f\n\r\t" , "m" : "" })",
                                   R"({"a":"x\/y"})", R"({"a":"\u0041"})", R"({"a\u0041":"1","a":"2"})", R"({"a":"1","a":"2"})",
                                   R"({"k":"caf\u00e9","j":"\ud83d\ude00"})"})
        expect_same(R"({"__metadata__":)" + meta + R"(,"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1);
    // Zero-size tensors at one offset: the same order.
    expect_same(R"({"e1":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                R"("e2":{"dtype":"F32","shape":[3,0],"data_offsets":[0,0]}})",
                1);
    expect_same("{}", 0);
    expect_same("  {  }  ", 0);
}

TEST(PlainHeader, DamagedHeadersGiveTheJsonParsersErrors) {
    for (const std::string json : {
             R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})",
             R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
             R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})",
             R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})",
             R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,8]}})",
             R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
             R"({"__metadata__":{},"__metadata__":{},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
             R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
             R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
             R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}})",
             R"({"__metadata__":{"k":1e999},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
             R"({"__metadata__":{"k":"v"]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
         })
        expect_same(json, 8);
}

}  // namespace
