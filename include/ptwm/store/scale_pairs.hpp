// Which tensor holds the block scales of a packed FP4 tensor. Finding the
// pair needs the safetensors header (names, dtypes, sizes), so it lives in
// the store stage; the grouping it selects is the planes stage's
// (planes/fp4_groups.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ptwm/planes/decomposition.hpp"
#include "ptwm/store/safetensors.hpp"

namespace ptwm {

struct ScalePair {
    uint32_t scale_tensor;      // index in the header's tensors
    Decomposition decomposition;  // fp4_mx_grouped or fp4_nv_grouped
};

// The scale tensor of a packed FP4 tensor, by the names exporters use
// (X.blocks / X_blocks with X.scales / X_scales: gpt-oss, OCP MX; X with
// X_scale: ModelOpt's NVFP4; X_packed with X_scale: compressed-tensors',
// llm-compressor's NVFP4 and MXFP4, `weight_packed` with `weight_scale`) and
// by shape: one 1-byte scale per 16 (MX, E8M0 or U8) or 8 (NV, F8_E4M3)
// bytes. Failing those names, the one tensor of the same module whose name
// says it is a scale and whose size and dtype fit (TensorRT-LLM: `weight`
// with `weights_scaling_factor`). One entry per tensor of `h`, nullopt for
// a tensor that is no paired FP4 tensor; a tensor that holds another's
// scales is never paired itself (a reader refuses chains of pairs).
std::vector<std::optional<ScalePair>> find_scale_pairs(const SafetensorsHeader& h);

}  // namespace ptwm
