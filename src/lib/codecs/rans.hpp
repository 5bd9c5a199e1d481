// Order-0 and order-1 rANS over bytes, from htscodecs (samtools' CRAM 3.1
// codecs). Payloads are htscodecs' own format with the decoded size left
// out (the store knows it), so any htscodecs build can read them.
//
// Why not just call rans_compress_to_4x16/rans_uncompress_to_4x16: in the
// Debian build (1.3.0) each call probes the CPU with cpuid, which traps to
// the hypervisor on virtual machines and costs 20-25 us, as much as
// decoding a 64 KiB plane. For the 32-way streams that carry the bulk of
// the data we therefore choose the SIMD kernel once and call it directly.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ptwm::rans {

std::vector<uint8_t> encode(std::span<const uint8_t> plane, unsigned order);
// How many interleaved states encode() uses for a plane of n bytes (4 or 32).
unsigned states(size_t n);
// False when the payload is malformed or does not decode to out.size() bytes.
bool decode(std::span<const uint8_t> payload, std::span<uint8_t> out);

}  // namespace ptwm::rans
