// Decoding a whole store front to back on several threads, handing the
// original bytes to a sink in order and in large batches (unpack, verify).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "ptwm/store/store_reader.hpp"

namespace ptwm {

struct DecodeAllOptions {
    unsigned threads = 0;                // 0: all cores
    // Original bytes decoded between two sink calls; 0: 1 MiB per thread,
    // small enough that the batch buffer stays in cache between sink calls.
    uint64_t batch_bytes = 0;
    // Called with each damaged chunk's index and message; without it the
    // first damaged chunk throws. A damaged chunk's bytes reach the sink zeroed.
    std::function<void(size_t chunk, const std::string& message)> on_damaged;
    std::function<void(uint64_t done, uint64_t total)> progress;
};

// sink(offset, bytes): consecutive ranges covering [0, original_size()), in
// order, one call at a time, from a thread of decode_all's own (the next
// batch decodes meanwhile); its exceptions reach the caller. `bytes` is
// valid only during the call.
void decode_all(const StoreReader& store, const DecodeAllOptions& opt,
                const std::function<void(uint64_t offset, std::span<const uint8_t> bytes)>& sink);

}  // namespace ptwm
