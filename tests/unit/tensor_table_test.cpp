// The reader's compact tensor table must agree with the parsed header on
// every tensor's extent, dtype and shape, for less memory.
#include <gtest/gtest.h>

#include <string>

#include "ptwm/store/safetensors.hpp"
#include "ptwm/store/tensor_table.hpp"
#include "test_files.hpp"

namespace ptwm {
namespace {

TEST(TensorTable, AgreesWithTheParsedHeader) {
    std::vector<test::TestTensor> tensors;
    for (int i = 0; i < 300; ++i) {
        const uint64_t rows = 1 + i % 7, cols = 3 + i % 5;
        std::vector<uint64_t> shape = i % 11 == 0 ? std::vector<uint64_t>{} : std::vector<uint64_t>{rows, cols};
        const uint64_t elements = shape.empty() ? 1 : rows * cols;
        const bool f32 = i % 2 == 0;
        tensors.push_back({"model.layers." + std::to_string(i) + ".mlp.experts.weight", f32 ? "F32" : "BF16", shape,
                           std::vector<uint8_t>(elements * (f32 ? 4 : 2), static_cast<uint8_t>(i))});
    }
    tensors.push_back({"empty", "F16", {0, 4}, {}});
    const auto file = test::make_safetensors(tensors, R"({"format":"pt"})");
    const SafetensorsHeader h = parse_safetensors(file, file.size(), "t.safetensors");
    const TensorTable table(h, file.size());
    ASSERT_EQ(table.size(), h.tensors.size());
    for (size_t t = 0; t < table.size(); ++t) {
        const TensorInfo& want = h.tensors[t];
        EXPECT_EQ(table.begin(t), want.begin) << want.name;
        EXPECT_EQ(table.end(t), want.end) << want.name;
        EXPECT_EQ(table.bytes(t), want.size()) << want.name;
        EXPECT_EQ(table.dtype(t), want.dtype) << want.name;
        EXPECT_EQ(std::vector<uint64_t>(table.shape(t).begin(), table.shape(t).end()), want.shape) << want.name;
    }
    EXPECT_LE(table.memory_bytes(), 40 * table.size() + 64);
}

TEST(TensorTable, NoTensors) {
    const auto file = test::make_safetensors({});
    const SafetensorsHeader h = parse_safetensors(file, file.size(), "t.safetensors");
    const TensorTable table(h, file.size());
    EXPECT_EQ(table.size(), 0u);
}

}  // namespace
}  // namespace ptwm
