#include "ptwm/planes/dtype.hpp"

#include <array>

namespace ptwm {
namespace {

using D = Decomposition;
constexpr D kStream[] = {D::stream};
constexpr D kSplit2[] = {D::split2};
constexpr D kSplit4[] = {D::split4};
constexpr D kSplit8[] = {D::split8};
constexpr D kBf16[] = {D::bf16_exponent};
constexpr D kF32[] = {D::f32_exponent};
// FP8: the whole byte's order-0 entropy is never above the sum of its
// nibbles', but the split is a separate stream a codec may code better.
constexpr D kE4m3[] = {D::stream, D::f8e4m3_exponent};
constexpr D kE5m2[] = {D::stream, D::f8e5m2_exponent};
constexpr D kF4[] = {D::stream, D::nibble_split};

constexpr std::array<DTypeInfo, 20> kTable = {{
    {DType::BOOL, "BOOL", 8, kStream},
    {DType::U8, "U8", 8, kStream},
    {DType::I8, "I8", 8, kStream},
    {DType::F8_E4M3, "F8_E4M3", 8, kE4m3},
    {DType::F8_E5M2, "F8_E5M2", 8, kE5m2},
    {DType::F8_E8M0, "F8_E8M0", 8, kStream},
    {DType::F4, "F4", 4, kF4},
    {DType::I16, "I16", 16, kSplit2},
    {DType::U16, "U16", 16, kSplit2},
    {DType::F16, "F16", 16, kSplit2},
    {DType::BF16, "BF16", 16, kBf16},
    {DType::I32, "I32", 32, kSplit4},
    {DType::U32, "U32", 32, kSplit4},
    {DType::F32, "F32", 32, kF32},
    {DType::I64, "I64", 64, kSplit8},
    {DType::U64, "U64", 64, kSplit8},
    {DType::F64, "F64", 64, kSplit8},
    {DType::C64, "C64", 64, kF32},  // a pair of F32
    // safetensors' 6-bit floats (OCP MX's FP6): elements straddle bytes, so
    // no split keeps a field in one plane; the bytes are coded as they are.
    {DType::F6_E2M3, "F6_E2M3", 6, kStream},
    {DType::F6_E3M2, "F6_E3M2", 6, kStream},
}};
static_assert(kTable.size() == static_cast<size_t>(DType::F6_E3M2) + 1);

}  // namespace

const DTypeInfo& dtype_info(DType d) { return kTable[static_cast<size_t>(d)]; }

std::optional<DType> parse_dtype(std::string_view name) {
    for (const auto& info : kTable)
        if (info.name == name) return info.dtype;
    return std::nullopt;
}

std::optional<uint64_t> tensor_bytes(DType d, uint64_t numel) {
    const unsigned bits = dtype_info(d).bits;
    if (bits % 8 != 0) {
        // Packed sub-byte elements: the tensor must fill whole bytes, as
        // safetensors requires.
        if (numel > UINT64_MAX / bits || numel * bits % 8 != 0) return std::nullopt;
        return numel * bits / 8;
    }
    const uint64_t width = bits / 8;
    if (numel > UINT64_MAX / width) return std::nullopt;
    return numel * width;
}

}  // namespace ptwm
