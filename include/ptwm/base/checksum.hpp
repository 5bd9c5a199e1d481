// XXH3-64 of a byte range: the checksum of every decoded chunk and of the
// store's sections. Same value as libxxhash's XXH3_64bits; computed by the
// widest vector unit the CPU has, because every chunk read pays for it.
#pragma once

#include <cstdint>
#include <span>

namespace ptwm {

uint64_t xxh3(std::span<const uint8_t> bytes);
inline uint64_t xxh3(const void* p, size_t n) { return xxh3({static_cast<const uint8_t*>(p), n}); }

}  // namespace ptwm
