#include "ptwm/store/scale_pairs.hpp"

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ptwm {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The grouping under which `s` holds the block scales of `t`: one 1-byte
// scale per 16 bytes (MX: E8M0 or U8) or per 8 (NV: F8_E4M3 or U8).
std::optional<Decomposition> grouping(const TensorInfo& t, const TensorInfo& s) {
    if (s.size() == 0 || t.size() % s.size() != 0) return std::nullopt;
    const uint64_t per_scale = t.size() / s.size();
    if (per_scale == 16 && (s.dtype == DType::F8_E8M0 || s.dtype == DType::U8)) return Decomposition::fp4_mx_grouped;
    if (per_scale == 8 && (s.dtype == DType::F8_E4M3 || s.dtype == DType::U8)) return Decomposition::fp4_nv_grouped;
    return std::nullopt;
}

// A name's module (up to its last '.') and leaf (after it).
std::pair<std::string_view, std::string_view> module_and_leaf(std::string_view name) {
    const auto dot = name.rfind('.');
    if (dot == std::string_view::npos) return {{}, name};
    return {name.substr(0, dot), name.substr(dot + 1)};
}

// A leaf that says its tensor is a scale: scale, scales, scaling_factor.
bool is_scale_leaf(std::string_view leaf) { return leaf.find("scal") != std::string_view::npos; }

// Each module's scale-named tensors (the last rule's candidates).
using ModuleScales = std::unordered_map<std::string_view, std::vector<uint32_t>>;

std::optional<ScalePair> pair_of(const SafetensorsHeader& h, uint32_t tensor, const ModuleScales& module_scales) {
    const TensorInfo& t = h.tensors[tensor];
    if (t.dtype != DType::U8 && t.dtype != DType::F4 && t.dtype != DType::I8) return std::nullopt;
    std::vector<std::string> names;
    for (const char* sep : {".", "_"}) {
        if (ends_with(t.name, std::string(sep) + "blocks"))
            names.push_back(t.name.substr(0, t.name.size() - 6) + "scales");
    }
    // compressed-tensors (llm-compressor, vLLM) names the packed nibbles
    // `weight_packed` and their scales `weight_scale` (beside
    // `weight_global_scale`); its INT4 layouts use the same names, but with
    // I32 words and BF16/F16 scales, which the dtype and size checks refuse.
    if (ends_with(t.name, "_packed")) names.push_back(t.name.substr(0, t.name.size() - 6) + "scale");
    names.push_back(t.name + "_scale");
    names.push_back(t.name + ".scales");
    names.push_back(t.name + "_scales");
    for (const auto& want : names) {
        const auto i = h.find(want);
        if (!i || *i == tensor) continue;
        if (const auto d = grouping(t, h.tensors[*i])) return ScalePair{*i, *d};
    }
    // Names none of the above know (TensorRT-LLM's checkpoints: `weight`
    // with `weights_scaling_factor`): a tensor of the same module whose leaf
    // says it is a scale and has the size and dtype of this tensor's block
    // scales. Only where that leaves one choice, or one whose leaf starts
    // with this tensor's leaf (a module holding several FP4 tensors, each
    // with its scales): a guess that pairs wrongly costs size, never bytes,
    // and two guesses are not taken. A scale-named tensor is never taken
    // for the blocks.
    const auto [module, leaf] = module_and_leaf(t.name);
    const auto candidates = module_scales.find(module);
    if (is_scale_leaf(leaf) || candidates == module_scales.end()) return std::nullopt;
    std::optional<ScalePair> any, prefixed;
    unsigned any_count = 0, prefixed_count = 0;
    for (const uint32_t i : candidates->second) {
        const auto d = grouping(t, h.tensors[i]);
        if (!d) continue;
        any = ScalePair{i, *d}, ++any_count;
        if (module_and_leaf(h.tensors[i].name).second.starts_with(leaf)) prefixed = ScalePair{i, *d}, ++prefixed_count;
    }
    if (any_count == 1) return any;
    if (prefixed_count == 1) return prefixed;
    return std::nullopt;
}

}  // namespace

std::vector<std::optional<ScalePair>> find_scale_pairs(const SafetensorsHeader& h) {
    // The last rule looks among a module's scale-named tensors: gathered
    // once, so that a header of many unpaired byte tensors is not scanned
    // once for each (20000 of them took 3 s).
    ModuleScales module_scales;
    for (uint32_t i = 0; i < h.tensors.size(); ++i) {
        const auto [module, leaf] = module_and_leaf(h.tensors[i].name);
        if (is_scale_leaf(leaf)) module_scales[module].push_back(i);
    }
    std::vector<std::optional<ScalePair>> pairs(h.tensors.size());
    for (uint32_t t = 0; t < h.tensors.size(); ++t) pairs[t] = pair_of(h, t, module_scales);
    // No chains: a tensor that holds another's scales is not blocks itself
    // (`w`, `w_scale`, `w_scale_scale`, each a sixteenth of the one before,
    // pair link by link by name and size). A grouped chunk's scales must
    // decode on their own, so a reader refuses a store whose scale tensor
    // is grouped: such a pair packed, and its store could not be opened.
    // Decided on the pairs as found, so that no link of a chain survives.
    std::vector<bool> holds_scales(h.tensors.size());
    for (const auto& pair : pairs)
        if (pair) holds_scales[pair->scale_tensor] = true;
    for (uint32_t t = 0; t < h.tensors.size(); ++t)
        if (holds_scales[t]) pairs[t].reset();
    return pairs;
}

}  // namespace ptwm
