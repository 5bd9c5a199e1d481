#include "ptwm/planes/fp4_groups.hpp"

#include <algorithm>

namespace ptwm {
namespace {

// MX scales are E8M0 exponents already; of an NV scale (E4M3) the exponent
// carries the magnitude that shapes the values' distribution.
uint8_t scale_context(Decomposition d, uint8_t scale) {
    return d == Decomposition::fp4_nv_grouped ? static_cast<uint8_t>((scale >> 3) & 0x0F) : scale;
}

unsigned group_of(Decomposition d, uint8_t scale, uint8_t base) {
    const int g = scale_context(d, scale) - base;
    return static_cast<unsigned>(std::clamp(g, 0, static_cast<int>(kMaxPlanes) - 1));
}

}  // namespace

unsigned block_bytes(Decomposition grouped) { return element_bytes(grouped); }

uint8_t group_base(Decomposition d, std::span<const uint8_t> scales) {
    uint8_t base = 0xFF;
    for (uint8_t s : scales) base = std::min(base, scale_context(d, s));
    return scales.empty() ? 0 : base;
}

std::array<size_t, kMaxPlanes> group_plane_lengths(Decomposition d, std::span<const uint8_t> scales, uint8_t base) {
    std::array<size_t, kMaxPlanes> len{};
    if (d == Decomposition::fp4_mx_modelled) {  // the blocks as they are
        len[0] = scales.size() * block_bytes(d);
        return len;
    }
    for (uint8_t s : scales) len[group_of(d, s, base)] += 2 * block_bytes(d);
    return len;
}

void add_group_byte_histograms(Decomposition d, std::span<const uint8_t> in, std::span<const uint8_t> scales, uint8_t base,
                               std::span<std::array<uint64_t, 256>, kMaxPlanes> per_group) {
    const unsigned bb = block_bytes(d);  // 8 or 16: whole steps of 8 below
    for (size_t b = 0; b < scales.size(); ++b) {
        auto& h = per_group[group_of(d, scales[b], base)];
        const uint8_t* p = in.data() + b * bb;
        for (unsigned k = 0; k < bb; k += 8) {
            ++h[p[k]], ++h[p[k + 1]], ++h[p[k + 2]], ++h[p[k + 3]];
            ++h[p[k + 4]], ++h[p[k + 5]], ++h[p[k + 6]], ++h[p[k + 7]];
        }
    }
}

void split_grouped(Decomposition d, std::span<const uint8_t> in, std::span<const uint8_t> scales, uint8_t base,
                   std::span<uint8_t* const> planes) {
    const unsigned bb = block_bytes(d);
    if (d == Decomposition::fp4_mx_modelled) {
        std::copy(in.begin(), in.begin() + static_cast<long>(scales.size() * bb), planes[0]);
        return;
    }
    std::array<uint8_t*, kMaxPlanes> at{};
    std::copy(planes.begin(), planes.end(), at.begin());
    for (size_t b = 0; b < scales.size(); ++b) {
        uint8_t*& dst = at[group_of(d, scales[b], base)];
        for (unsigned k = 0; k < bb; ++k) {
            const uint8_t byte = in[b * bb + k];
            *dst++ = byte & 0x0F;
            *dst++ = byte >> 4;
        }
    }
}

void merge_grouped(Decomposition d, std::span<const uint8_t* const> planes, std::span<const uint8_t> scales, uint8_t base,
                   std::span<uint8_t> out) {
    const unsigned bb = block_bytes(d);
    if (d == Decomposition::fp4_mx_modelled) {
        std::copy(planes[0], planes[0] + scales.size() * bb, out.begin());
        return;
    }
    std::array<const uint8_t*, kMaxPlanes> at{};
    std::copy(planes.begin(), planes.end(), at.begin());
    for (size_t b = 0; b < scales.size(); ++b) {
        const uint8_t*& src = at[group_of(d, scales[b], base)];
        for (unsigned k = 0; k < bb; ++k, src += 2) out[b * bb + k] = static_cast<uint8_t>((src[0] & 0x0F) | (src[1] << 4));
    }
}

}  // namespace ptwm
