#include "ptwm/store/tensor_table.hpp"

#include "ptwm/base/error.hpp"

namespace ptwm {

TensorTable::TensorTable(const SafetensorsHeader& header, uint64_t data_end) {
    const size_t n = header.tensors.size();
    begin_.reserve(n + 1);
    shape_at_.reserve(n + 1);
    dtype_.reserve(n);
    size_t dims = 0;
    for (const TensorInfo& t : header.tensors) dims += t.shape.size();
    if (dims > UINT32_MAX) throw Error("a header with more than 4 billion dimensions");
    dims_.reserve(dims);
    for (size_t i = 0; i < n; ++i) {
        const TensorInfo& t = header.tensors[i];
        // parse_safetensors checks that they tile; the accessors rely on it.
        if (t.end != (i + 1 < n ? header.tensors[i + 1].begin : data_end))
            throw Error("tensor '" + t.name + "' does not end where the next one begins");
        begin_.push_back(t.begin);
        shape_at_.push_back(static_cast<uint32_t>(dims_.size()));
        dims_.insert(dims_.end(), t.shape.begin(), t.shape.end());
        dtype_.push_back(t.dtype);
    }
    begin_.push_back(data_end);
    shape_at_.push_back(static_cast<uint32_t>(dims_.size()));
}

size_t TensorTable::memory_bytes() const {
    return begin_.capacity() * sizeof(uint64_t) + shape_at_.capacity() * sizeof(uint32_t) +
           dims_.capacity() * sizeof(uint64_t) + dtype_.capacity() * sizeof(DType);
}

}  // namespace ptwm
