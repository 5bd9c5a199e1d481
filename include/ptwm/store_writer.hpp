// Pack: safetensors file -> store file, written to a temporary file and
// renamed into place so a failure never leaves a partial store behind.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ptwm/codec.hpp"

namespace ptwm {

// Default chunk size; see man/ptwmfs-store.5 for the measurement behind it.
inline constexpr uint32_t kDefaultChunkBytes = 256u << 10;

struct PackOptions {
    EncodeOptions encode;
    uint32_t chunk_bytes = kDefaultChunkBytes;
    unsigned threads = 0;  // 0: all cores
    // Called from the writing thread with the original bytes done so far.
    std::function<void(uint64_t done, uint64_t total)> progress;
};

struct PackResult {
    uint64_t original_bytes = 0;
    uint64_t stored_bytes = 0;
    uint64_t chunks = 0;
};

// Throws Error naming the file (and tensor) on bad input; `dst` is then untouched.
PackResult pack_file(const std::string& src, const std::string& dst, const PackOptions& opt);

}  // namespace ptwm
