#include "codecs/bit_pack.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "ptwm/base/error.hpp"

namespace ptwm::bit_pack {
namespace {

constexpr size_t kHeader = 2;  // base, width

size_t packed_bytes(size_t n, unsigned width) { return (n * width + 7) / 8; }

}  // namespace

size_t encoded_size(const std::array<uint64_t, 256>& histogram, size_t n) {
    const auto lo = std::find_if(histogram.begin(), histogram.end(), [](uint64_t c) { return c != 0; });
    if (n == 0 || lo == histogram.end()) return 0;
    const auto hi = std::find_if(histogram.rbegin(), histogram.rend(), [](uint64_t c) { return c != 0; });
    const auto span = static_cast<unsigned>((histogram.rend() - hi - 1) - (lo - histogram.begin()));
    if (span == 0) return 0;
    return kHeader + packed_bytes(n, static_cast<unsigned>(std::bit_width(span)));
}

std::vector<uint8_t> encode(std::span<const uint8_t> plane) {
    const auto [lo, hi] = std::minmax_element(plane.begin(), plane.end());
    const uint8_t base = plane.empty() ? 0 : *lo;
    const unsigned width = std::max(1u, static_cast<unsigned>(std::bit_width(plane.empty() ? 0u : unsigned{*hi} - base)));
    std::vector<uint8_t> out(kHeader + packed_bytes(plane.size(), width));
    out[0] = base;
    out[1] = static_cast<uint8_t>(width);
    uint8_t* o = out.data() + kHeader;
    uint64_t acc = 0;
    unsigned bits = 0;
    for (uint8_t b : plane) {
        acc |= uint64_t{static_cast<uint8_t>(b - base)} << bits;
        bits += width;
        for (; bits >= 8; bits -= 8, acc >>= 8) *o++ = static_cast<uint8_t>(acc);
    }
    if (bits) *o = static_cast<uint8_t>(acc);
    return out;
}

void decode(std::span<const uint8_t> payload, std::span<uint8_t> out) {
    if (payload.size() < kHeader) throw CorruptData("bit-packed plane: payload shorter than its header");
    const uint8_t base = payload[0];
    const unsigned width = payload[1];
    if (width < 1 || width > 8)
        throw CorruptData("bit-packed plane: width " + std::to_string(width) + " is not 1 to 8");
    const std::span<const uint8_t> packed = payload.subspan(kHeader);
    const size_t n = out.size();
    if (packed.size() != packed_bytes(n, width))
        throw CorruptData("bit-packed plane: " + std::to_string(packed.size()) + " bytes of bits where " +
                          std::to_string(n) + " values of " + std::to_string(width) + " bits take " +
                          std::to_string(packed_bytes(n, width)));
    const uint64_t mask = (uint64_t{1} << width) - 1;
    // The value whose bits start `bit` bits into `bytes`, from the 64-bit
    // word at its first byte.
    const auto value = [&](const uint8_t* bytes, size_t bit) {
        uint64_t word;
        std::memcpy(&word, bytes + bit / 8, 8);
        return static_cast<uint8_t>(base + ((word >> (bit % 8)) & mask));
    };
    // The last few values, whose word would run past the payload, from a
    // zero-padded copy.
    const size_t whole_words = packed.size() >= 8 ? (packed.size() - 8) * 8 / width + 1 : 0;
    const size_t fast = std::min(n, whole_words);
    size_t i = 0;
    for (; i < fast; ++i) out[i] = value(packed.data(), i * width);
    if (i == n) return;
    const size_t from = i * width / 8;
    uint8_t tail[16] = {};
    std::memcpy(tail, packed.data() + from, packed.size() - from);
    for (; i < n; ++i) out[i] = value(tail, i * width - from * 8);
}

}  // namespace ptwm::bit_pack
