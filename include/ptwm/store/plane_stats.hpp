// What a store holds, per tensor and per plane: sizes, the codecs its chunks
// use, and order-0 entropy bounds over the whole tensor. Shared by
// `ptwmfs-tool inspect` and the codec benchmark, so the bound a ratio is
// judged against is computed one way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ptwm/codecs/codec.hpp"
#include "ptwm/store/store_reader.hpp"

namespace ptwm {

struct PlaneStats {
    uint64_t plane_bytes = 0;
    uint64_t stored_bytes = 0;
    // Each codec the plane's chunks use, with how many use it, in the order
    // first met: nearly always one, so a short list (a map cost a node).
    std::vector<std::pair<Codec, uint64_t>> codecs;
    double order0_bits = 0;  // the order-0 entropy of the plane's bytes over the whole tensor
};

struct TensorStats {
    std::string decomposition;  // of its first chunk ("" for an empty tensor)
    uint64_t original_bytes = 0;
    uint64_t stored_bytes = 0;
    std::vector<PlaneStats> planes;
    double whole_order0_bits = 0;  // of the tensor's own bytes (the whole-byte bound of FP8)
};

// Decodes every chunk (checking checksums: throws CorruptData on damage).
// One entry per tensor of the header, in offset order. `progress`, when
// set, is told the original bytes done and the total after each chunk.
// The histograms the bounds come from are kept for one tensor at a time
// (2 KiB each, one a plane and one of the whole bytes): kept for every
// tensor, a file of 100,000 small tensors took 1 GB of them.
std::vector<TensorStats> collect_plane_stats(
    const StoreReader& store, const std::function<void(uint64_t done, uint64_t total)>& progress = {});

}  // namespace ptwm
