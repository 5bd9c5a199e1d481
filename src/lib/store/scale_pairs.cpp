#include "ptwm/store/scale_pairs.hpp"

#include <string>
#include <vector>

namespace ptwm {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::optional<ScalePair> find_scale_pair(const SafetensorsHeader& h, uint32_t tensor) {
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
        const TensorInfo& s = h.tensors[*i];
        if (s.size() == 0 || t.size() % s.size() != 0) continue;
        const uint64_t per_scale = t.size() / s.size();
        if (per_scale == 16 && (s.dtype == DType::F8_E8M0 || s.dtype == DType::U8))
            return ScalePair{*i, Decomposition::fp4_mx_grouped};
        if (per_scale == 8 && (s.dtype == DType::F8_E4M3 || s.dtype == DType::U8))
            return ScalePair{*i, Decomposition::fp4_nv_grouped};
    }
    return std::nullopt;
}

}  // namespace ptwm
