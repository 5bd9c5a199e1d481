// Strict safetensors header parsing. The header bytes are kept verbatim so
// an unpacked file is byte-identical to the packed one.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ptwm/planes/dtype.hpp"

namespace ptwm {

struct TensorInfo {
    std::string name;
    DType dtype;
    std::vector<uint64_t> shape;
    uint64_t begin;  // absolute file offsets (data offsets + data section start)
    uint64_t end;
    uint64_t size() const { return end - begin; }
};

struct SafetensorsHeader {
    std::vector<uint8_t> prefix;      // the file's bytes before the data section: 8-byte length + JSON
    std::vector<TensorInfo> tensors;  // sorted by begin; they tile the data section exactly
    std::string metadata_json;        // the "__metadata__" object as JSON text ("" when absent)
    std::vector<uint32_t> by_name;    // indices into tensors, sorted by name
    uint64_t data_begin() const { return prefix.size(); }
    // The index of the tensor called `name` (O(log n)).
    std::optional<uint32_t> find(std::string_view name) const;
};

// The largest JSON header we accept (safetensors itself caps at 100 MB).
inline constexpr uint64_t kMaxHeaderBytes = 100u << 20;

// Parse and validate the header of a safetensors file of `file_size` bytes
// whose first bytes are `head` (at least 8 bytes; the whole header when the
// length field allows it). `what` names the file in error messages.
// Throws Error saying what is wrong: header length out of bounds, JSON that
// is not an object, unknown dtype, a shape that overflows, offsets that
// overlap, leave gaps or run past the end of the file.
SafetensorsHeader parse_safetensors(std::span<const uint8_t> head, uint64_t file_size,
                                    const std::string& what);
// The same, keeping head's own bytes as the prefix rather than a copy of
// them (a header runs to 100 MB): on success the prefix holds head's buffer,
// at the same address; if it throws, `head` is as it was.
SafetensorsHeader parse_safetensors(std::vector<uint8_t>&& head, uint64_t file_size, const std::string& what);
// Read and parse the header of a file on disk.
SafetensorsHeader read_safetensors_header(const std::string& path);

// Whether the file looks like safetensors (by content, not by name): a sane
// length field followed by a JSON object. Never throws.
bool looks_like_safetensors(const std::string& path);

}  // namespace ptwm
