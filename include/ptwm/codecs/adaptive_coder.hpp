// An adaptive binary range coder (the LZMA kind: 11-bit probabilities, one
// per node of a bit tree, updated after every bit). It needs no frequency
// table, so it wins where a static coder's table costs more than the data
// saves: small planes (block scales, biases) and symbols coded under a
// context, such as FP4 values under their block's scale. It decodes about
// ten times slower than rANS; the plane contest only picks it when it is
// clearly smaller.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ptwm::adaptive {

// Bytes, each coded under the context of the byte before it (order 1) or
// none (order 0). `order` is kept in the payload's first byte.
std::vector<uint8_t> encode_bytes(std::span<const uint8_t> in, unsigned order);
// A lower bound on the size of encode_bytes(in, 0), for deciding whether to
// run it: each tree node's Krichevsky-Trofimov code length, which depends
// only on the node's counts while no node halves them (at most 1024 bytes),
// less an allowance for the coder's rounded probabilities. 0 (no bound) for
// longer inputs.
double order0_floor(std::span<const uint8_t> in);
// Throws CorruptData on a malformed payload header; a damaged body decodes
// to wrong bytes, which the chunk checksum catches.
void decode_bytes(std::span<const uint8_t> payload, std::span<uint8_t> out);

// 4-bit symbols (0..15, one per byte of `symbols`), symbol i coded under
// context contexts[i] < context_count together with the previous symbol.
std::vector<uint8_t> encode_nibbles(std::span<const uint8_t> symbols, std::span<const uint8_t> contexts,
                                    unsigned context_count);
void decode_nibbles(std::span<const uint8_t> payload, std::span<const uint8_t> contexts, unsigned context_count,
                    std::span<uint8_t> symbols);

}  // namespace ptwm::adaptive
