// Pack: safetensors file -> store file, written to a temporary file and
// renamed into place so a failure never leaves a partial store behind.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>
#include <string>

#include "ptwm/base/file_io.hpp"
#include "ptwm/codecs/codec.hpp"
#include "ptwm/planes/decomposition.hpp"
#include "ptwm/store/safetensors.hpp"
#include "ptwm/store/store_format.hpp"

namespace ptwm {

// Default chunk size; see man/ptwmfs-store.5 for the measurement behind it.
inline constexpr uint32_t kDefaultChunkBytes = 256u << 10;

struct PackOptions {
    EncodeOptions encode;
    uint32_t chunk_bytes = kDefaultChunkBytes;
    unsigned threads = 0;  // 0: all cores
    Durability durability = Durability::kFsync;  // of the store file (kByCaller: in a staged tree)
    // Called from the writing thread with the original bytes done so far.
    std::function<void(uint64_t done, uint64_t total)> progress;
};

struct PackResult {
    uint64_t original_bytes = 0;
    uint64_t stored_bytes = 0;
    uint64_t chunks = 0;
    uint64_t batches = 0;  // reads and writes the chunks were encoded between
};

// Throws Error naming the file (and tensor) on bad input; `dst` is then untouched.
PackResult pack_file(const std::string& src, const std::string& dst, const PackOptions& opt);
// The same with `src`'s header already parsed (read_safetensors_header), for
// a caller that parsed it first to decide whether to pack the file at all:
// a header of 100 MB is parsed once, not twice.
PackResult pack_file(const std::string& src, const SafetensorsHeader& header, const std::string& dst,
                     const PackOptions& opt);

// How pack_file cuts a file into chunks, exposed so benchmarks time the
// same work. `read(offset, out)` fills `out` from the source file.
struct PlannedChunk {
    uint64_t offset;
    uint32_t length;
    uint32_t tensor;
    Decomposition decomposition;
    uint32_t scale_tensor = kNoTensor;  // grouped FP4: where this chunk's block scales are
    bool block_scales = false;          // the chunk is part of an FP4 tensor's scale tensor
};
using SourceReader = std::function<void(uint64_t offset, std::span<uint8_t> out)>;
// Each tensor cut into element-aligned chunks of at most `chunk_bytes`, with
// the decomposition that estimates smallest on the tensor's first bytes.
std::vector<PlannedChunk> plan_chunks(const SafetensorsHeader& h, uint32_t chunk_bytes, const SourceReader& read);
// The block scales a grouped chunk is encoded with (empty for other chunks).
std::vector<uint8_t> planned_chunk_scales(const SafetensorsHeader& h, const PlannedChunk& c, const SourceReader& read);

}  // namespace ptwm
