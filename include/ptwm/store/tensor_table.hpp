// What reading chunks needs of a store's tensors, kept compact: each
// tensor's first byte, dtype and shape, about 30 bytes a tensor where the
// parsed header (SafetensorsHeader) takes about 230 with names and JSON
// metadata. A shard of a large mixture-of-experts model has tens of
// thousands of tensors; the reader keeps this table and parses the full
// header only when asked for it (StoreReader::header).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ptwm/planes/dtype.hpp"
#include "ptwm/store/safetensors.hpp"

namespace ptwm {

class TensorTable {
public:
    TensorTable() = default;
    // From a parsed header, whose tensors tile the data section in order.
    explicit TensorTable(const SafetensorsHeader& header, uint64_t data_end);

    size_t size() const { return dtype_.size(); }
    uint64_t begin(size_t t) const { return begin_[t]; }
    uint64_t end(size_t t) const { return begin_[t + 1]; }  // the next one's begin: they tile
    uint64_t bytes(size_t t) const { return end(t) - begin(t); }
    DType dtype(size_t t) const { return dtype_[t]; }
    std::span<const uint64_t> shape(size_t t) const {
        return std::span(dims_).subspan(shape_at_[t], shape_at_[t + 1] - shape_at_[t]);
    }

    size_t memory_bytes() const;

private:
    std::vector<uint64_t> begin_;     // size() + 1: the last is the data section's end
    std::vector<uint32_t> shape_at_;  // size() + 1: tensor t's dims are dims_[shape_at_[t], shape_at_[t+1])
    std::vector<uint64_t> dims_;
    std::vector<DType> dtype_;
};

}  // namespace ptwm
