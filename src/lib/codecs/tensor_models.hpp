// Context models for tensors whose planes a static order-0 coder cannot code
// below their entropy: block scales (MXFP4's E8M0 bytes) and whole FP8 bytes.
// Each codes one byte plane with an adaptive binary range coder
// (context_coder.hpp) under contexts taken from the tensor's layout, so the
// codec needs the tensor's shape and where the chunk starts in it.
//
// Both are lossless for any layout: the layout only picks contexts, and a
// wrong guess costs size, never bytes. They decode at tens of MB/s (scales)
// and about 10 MB/s (FP8), against GB/s for rANS, so the plane contest uses
// them where they pay: scale tensors are a few percent of an FP4 model, and
// the FP8 model is kept for the slow levels.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ptwm/codecs/codec.hpp"

namespace ptwm::models {

// The scale model's choice for a tensor (its channel period, of those it
// tries the one its estimate codes smallest) and a floor under the payload
// that choice codes to, from the same estimate (see plan_scales). The
// plane contest skips the coding where the floor already cannot win.
struct ScalePlan {
    uint64_t blocks_per_row = 1, blocks_per_tap = 0;
    double floor_bytes = 0;
};
ScalePlan plan_scales(std::span<const uint8_t> in, const TensorLayout& layout);
std::vector<uint8_t> encode_scales(std::span<const uint8_t> in, const TensorLayout& layout, const ScalePlan& plan);
std::vector<uint8_t> encode_scales(std::span<const uint8_t> in, const TensorLayout& layout);
void decode_scales(std::span<const uint8_t> payload, std::span<uint8_t> out, const TensorLayout& layout);

// Block scale tensors of either microscaling format (MXFP4's E8M0 bytes,
// NVFP4's E4M3 bytes): the contexts (none, the previous scale, or that and
// a row/column level) and the split of a byte into a part coded around the
// tensor's most frequent value and low bits are searched per tensor and
// written first in the payload (codec 11, scale-mix).
std::vector<uint8_t> encode_scale_mix(std::span<const uint8_t> in, const TensorLayout& layout);
void decode_scale_mix(std::span<const uint8_t> payload, std::span<uint8_t> out, const TensorLayout& layout);

std::vector<uint8_t> encode_f8(std::span<const uint8_t> in, const TensorLayout& layout);
void decode_f8(std::span<const uint8_t> payload, std::span<uint8_t> out, const TensorLayout& layout);

// MXFP4 blocks (16 bytes, 32 E2M1 values, one scale each in layout.scales).
std::vector<uint8_t> encode_fp4(std::span<const uint8_t> in, const TensorLayout& layout);
void decode_fp4(std::span<const uint8_t> payload, std::span<uint8_t> out, const TensorLayout& layout);

}  // namespace ptwm::models
