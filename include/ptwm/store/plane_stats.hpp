// What a store holds, per tensor and per plane: sizes, the codecs its chunks
// use, and histograms over the whole tensor, from which order-0 entropy
// bounds follow. Shared by `ptwmfs-tool inspect` and the codec benchmark, so
// the bound a ratio is judged against is computed one way.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ptwm/codecs/codec.hpp"
#include "ptwm/store/store_reader.hpp"

namespace ptwm {

struct PlaneStats {
    uint64_t plane_bytes = 0;
    uint64_t stored_bytes = 0;
    std::map<std::string, uint64_t> codecs;  // codec name -> chunks using it
    Histogram histogram{};                   // the plane's bytes over the whole tensor
};

struct TensorStats {
    std::string decomposition;  // of its first chunk ("" for an empty tensor)
    uint64_t original_bytes = 0;
    uint64_t stored_bytes = 0;
    std::vector<PlaneStats> planes;
    Histogram whole{};  // the tensor's own bytes (the whole-byte bound of FP8)
};

// Decodes every chunk (checking checksums: throws CorruptData on damage).
// One entry per tensor of the header, in offset order. `progress`, when
// set, is told the original bytes done and the total after each chunk.
std::vector<TensorStats> collect_plane_stats(
    const StoreReader& store, const std::function<void(uint64_t done, uint64_t total)>& progress = {});

}  // namespace ptwm
