// The safetensors dtype table: name, element width, and which plane
// decompositions are worth trying for it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "ptwm/planes/decomposition.hpp"

namespace ptwm {

enum class DType : uint8_t {
    BOOL, U8, I8, F8_E4M3, F8_E5M2, F8_E8M0, F4,
    I16, U16, F16, BF16,
    I32, U32, F32,
    I64, U64, F64, C64,
    F6_E2M3, F6_E3M2,  // MXFP6 elements, packed: 4 a 3 bytes (kept as bytes)
};

struct DTypeInfo {
    DType dtype;
    std::string_view name;  // as spelled in safetensors headers
    unsigned bits;          // bits per element (F4: 4)
    // Candidate decompositions, best guess first. The encoder estimates each
    // on the tensor's data and keeps the smallest.
    std::span<const Decomposition> candidates;
};

const DTypeInfo& dtype_info(DType d);
std::optional<DType> parse_dtype(std::string_view name);

// Bytes a tensor of `numel` elements occupies (F4 packs two per byte, F6
// four per three); nullopt on overflow or elements that leave a byte part
// filled (an odd number of F4, F6 not a multiple of 4).
std::optional<uint64_t> tensor_bytes(DType d, uint64_t numel);

}  // namespace ptwm
