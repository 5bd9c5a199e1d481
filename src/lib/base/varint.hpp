// LEB128 varints, the small header fields of the model codecs' payloads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ptwm/base/error.hpp"

namespace ptwm {

inline void put_varint(std::vector<uint8_t>& out, uint64_t v) {
    for (; v >= 0x80; v >>= 7) out.push_back(static_cast<uint8_t>(v | 0x80));
    out.push_back(static_cast<uint8_t>(v));
}

// Reads one varint off the front of `in`. `who` names the codec in the
// CorruptData it throws on a truncated or overlong one.
inline uint64_t get_varint(std::span<const uint8_t>& in, const char* who) {
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (in.empty()) throw CorruptData(std::string(who) + ": truncated header");
        const uint8_t b = in[0];
        in = in.subspan(1);
        v |= uint64_t{b & 0x7Fu} << shift;
        if (!(b & 0x80)) return v;
    }
    throw CorruptData(std::string(who) + ": bad header");
}

}  // namespace ptwm
