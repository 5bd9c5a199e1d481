// Damaged input, made by hand: every case asserts the error it must give --
// the exception type, a substring naming what is wrong, and the file's name --
// so a damaged model is reported, never half-read or crashed on.
//
// Safetensors cases write a small file and read its header.
#include <gtest/gtest.h>

#include <string>

#include "damaged_input.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/store/safetensors.hpp"

namespace {

using namespace damaged;

// ---------------------------------------------------------------------------
// Safetensors headers

class DamagedSafetensors : public ::testing::Test {
protected:
    // Writes `bytes` as a file and expects reading its header to fail naming
    // the file and saying each of `needles`.
    void expect_header_error(const Bytes& bytes, std::initializer_list<std::string> needles) {
        const std::string path = dir_.file("model.safetensors");
        write_file(path, bytes);
        expect_error([&] { ptwm::read_safetensors_header(path); }, needles);
        expect_error([&] { ptwm::read_safetensors_header(path); }, {path});
    }
    TempDir dir_;
};

const std::string kTwoTensors =
    R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})";

TEST_F(DamagedSafetensors, ValidFileParses) {
    // The base the cases below damage: it must be accepted as it is.
    const std::string path = dir_.file("ok.safetensors");
    write_file(path, safetensors(kTwoTensors, Bytes(12, 1)));
    const auto h = ptwm::read_safetensors_header(path);
    ASSERT_EQ(h.tensors.size(), 2u);
    EXPECT_EQ(h.tensors[1].name, "b");
}

TEST_F(DamagedSafetensors, ShorterThanTheLengthField) {
    expect_header_error({1, 2, 3}, {"shorter than the 8-byte header length"});
}

TEST_F(DamagedSafetensors, HeaderLengthLargerThanTheFile) {
    expect_header_error(with_length_field(safetensors(kTwoTensors, Bytes(12)), 5000),
                        {"header length 5000 runs past the end of the file"});
}

TEST_F(DamagedSafetensors, HeaderLengthBeyondTheSaneBound) {
    // 1 TiB: rejected before anything is allocated for it.
    expect_header_error(with_length_field(safetensors("{}"), 1ull << 40),
                        {"header length 1099511627776 is outside 2..104857600"});
    expect_header_error(with_length_field(safetensors("{}"), 1), {"header length 1 is outside"});
}

TEST_F(DamagedSafetensors, JsonThatIsNotAnObject) {
    expect_header_error(safetensors("[1, 2, 3]"), {"the header is not a JSON object"});
    expect_header_error(safetensors("\"text\""), {"the header is not a JSON object"});
    // The format says the header starts with '{': leading blanks are not allowed.
    expect_header_error(safetensors(" {}"), {"the header is not a JSON object"});
    expect_header_error(safetensors("{\"a\": "), {"header is not valid JSON"});
    expect_header_error(safetensors("{} {}"), {"header is not valid JSON"});
}

TEST_F(DamagedSafetensors, DuplicateTensorNames) {
    expect_header_error(safetensors(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                    R"("a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                                    Bytes(8)),
                        {"tensor name 'a' appears twice"});
}

TEST_F(DamagedSafetensors, OverlappingOffsets) {
    expect_header_error(safetensors(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                                    R"("b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                                    Bytes(8)),
                        {"tensor 'b' overlaps tensor 'a' at data offset 4"});
}

TEST_F(DamagedSafetensors, GapBetweenTensors) {
    expect_header_error(safetensors(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                    R"("b":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}})",
                                    Bytes(10)),
                        {"2 bytes at data offset 4 belong to no tensor (gap before 'b')"});
}

TEST_F(DamagedSafetensors, OffsetsPastTheEndOfTheFile) {
    const Bytes file = safetensors(kTwoTensors, Bytes(10));  // two bytes short
    expect_header_error(file, {"tensor 'b' ends at byte", "past the end of the file (" + std::to_string(file.size())});
}

TEST_F(DamagedSafetensors, BytesAfterTheLastTensor) {
    expect_header_error(safetensors(kTwoTensors, Bytes(15)), {"3 bytes after the last tensor belong to no tensor"});
}

TEST_F(DamagedSafetensors, EndBeforeBegin) {
    expect_header_error(safetensors(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", Bytes(4)),
                        {"tensor 'a'", "data_offsets end 0 is before begin 4"});
}

TEST_F(DamagedSafetensors, ShapeWhoseElementCountOverflows) {
    // 2^32 * 2^32 = 2^64: one past what 64 bits hold.
    expect_header_error(safetensors(R"({"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})"),
                        {"tensor 'a'", "element count overflows 64 bits"});
}

TEST_F(DamagedSafetensors, ShapeWhoseByteCountOverflows) {
    // 2^62 elements fit in 64 bits, their 2^64 bytes do not. The message must
    // say so, not blame whole bytes (which is about odd F4 counts).
    expect_header_error(safetensors(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})"),
                        {"tensor 'a'", "overflows 64 bits"});
}

TEST_F(DamagedSafetensors, OddNumberOfF4Elements) {
    expect_header_error(safetensors(R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", Bytes(2)),
                        {"tensor 'a'", "3 elements of F4 do not make whole bytes"});
}

TEST_F(DamagedSafetensors, F6ElementsThatLeaveAByteUnfilled) {
    expect_header_error(safetensors(R"({"a":{"dtype":"F6_E3M2","shape":[6],"data_offsets":[0,5]}})", Bytes(5)),
                        {"tensor 'a'", "6 elements of F6_E3M2 do not make whole bytes"});
}

TEST_F(DamagedSafetensors, ShapeDisagreesWithOffsets) {
    expect_header_error(safetensors(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", Bytes(8)),
                        {"shape and dtype make 12 bytes but data_offsets span 8"});
}

TEST_F(DamagedSafetensors, UnknownDtype) {
    expect_header_error(safetensors(R"({"a":{"dtype":"F12","shape":[1],"data_offsets":[0,2]}})", Bytes(2)),
                        {"tensor 'a'", "unknown dtype \"F12\""});
}

TEST_F(DamagedSafetensors, NonUtf8Names) {
    // A lone continuation byte, an overlong '/', a UTF-16 surrogate encoded as
    // UTF-8, and an escaped lone surrogate: none is a valid name.
    for (const std::string& name : {std::string("w\x80"), std::string("w\xC0\xAF"), std::string("w\xED\xA0\x80"),
                                   std::string("w\\ud800")}) {
        SCOPED_TRACE(name);
        const std::string json = "{\"" + name + R"(":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
        expect_header_error(safetensors(json, Bytes(1)), {"header is not valid JSON"});
    }
    expect_header_error(safetensors(std::string("{\"w\xFF\":{}}")), {"header is not valid JSON", "UTF-8"});
}

TEST_F(DamagedSafetensors, NonObjectMetadata) {
    expect_header_error(safetensors(R"({"__metadata__":[1]})"), {"\"__metadata__\" is not a JSON object"});
}

TEST(DamagedSafetensorsDeath, DeeplyNestedJsonIsAnErrorNotAStackOverflow) {
    // 100k nested arrays in the metadata: a 200 KB header, far under the
    // 100 MB bound, must be rejected, not recursed into until the stack ends.
    // Run in a child process so a crash fails this case, not the whole run.
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const std::string json = R"({"__metadata__":{"k":)" + std::string(100000, '[') + std::string(100000, ']') + "}}";
    const Bytes file = safetensors(json);
    EXPECT_EXIT(
        {
            try {
                ptwm::parse_safetensors(file, file.size(), "deep.safetensors");
            } catch (const ptwm::Error& e) {
                const std::string what = e.what();
                std::exit(what.find("deep.safetensors") != std::string::npos &&
                                  what.find("nested deeper than") != std::string::npos
                              ? 0
                              : 3);
            }
            std::exit(2);  // accepted
        },
        ::testing::ExitedWithCode(0), "");
}

}  // namespace
