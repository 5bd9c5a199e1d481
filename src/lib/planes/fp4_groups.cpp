#include "ptwm/planes/fp4_groups.hpp"

#include <algorithm>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace ptwm {
namespace {

uint8_t scale_context(Decomposition d, uint8_t scale) {
    return ptwm::scale_context(d == Decomposition::fp4_nv_grouped || d == Decomposition::fp4_nv_tabled, scale);
}

unsigned group_of(Decomposition d, uint8_t scale, uint8_t base) {
    const int g = scale_context(d, scale) - base;
    return static_cast<unsigned>(std::clamp(g, 0, static_cast<int>(kMaxPlanes) - 1));
}

// group_of for every scale byte, once a chunk: the group is looked up per
// block, and a table lookup is cheaper than the context and clamp.
std::array<uint8_t, 256> group_table(Decomposition d, uint8_t base) {
    std::array<uint8_t, 256> t;
    for (unsigned s = 0; s < 256; ++s) t[s] = static_cast<uint8_t>(group_of(d, static_cast<uint8_t>(s), base));
    return t;
}

// One block's bytes from its 2 * bb nibbles (low nibble first).
template <unsigned bb>
[[gnu::always_inline]] inline void merge_block(const uint8_t* src, uint8_t* out) {
#ifdef __SSE2__
    // Each 16-bit lane holds a byte's two nibbles: low | high << 4 lands in
    // the lane's low byte, and a pack keeps those (as the scalar loop, any
    // bits above a nibble are dropped).
    const __m128i lo = _mm_set1_epi16(0x0F), hi = _mm_set1_epi16(0xF0);
    auto pair = [&](const uint8_t* p) {
        const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        return _mm_or_si128(_mm_and_si128(w, lo), _mm_and_si128(_mm_srli_epi16(w, 4), hi));
    };
    if constexpr (bb == 16) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(pair(src), pair(src + 16)));
    } else {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(pair(src), _mm_setzero_si128()));
    }
#else
    for (unsigned k = 0; k < bb; ++k) out[k] = static_cast<uint8_t>((src[2 * k] & 0x0F) | (src[2 * k + 1] << 4));
#endif
}

template <unsigned bb>
void merge_blocks(std::span<const uint8_t* const> planes, std::span<const uint8_t> scales, const std::array<uint8_t, 256>& group,
                  std::span<uint8_t> out) {
    std::array<const uint8_t*, kMaxPlanes> at{};
    std::copy(planes.begin(), planes.end(), at.begin());
    uint8_t* o = out.data();
    for (size_t b = 0; b < scales.size(); ++b, o += bb) {
        const uint8_t*& src = at[group[scales[b]]];
        merge_block<bb>(src, o);
        src += 2 * bb;
    }
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
    if (keeps_blocks(d)) {  // the blocks as they are
        len[0] = scales.size() * block_bytes(d);
        return len;
    }
    // Scales counted by value, then by group: a chunk has thousands of
    // blocks and 256 scale values at most.
    std::array<size_t, 256> count{};
    for (uint8_t s : scales) ++count[s];
    const auto group = group_table(d, base);
    for (unsigned s = 0; s < 256; ++s) len[group[s]] += count[s] * 2 * block_bytes(d);
    return len;
}

void add_group_byte_histograms(Decomposition d, std::span<const uint8_t> in, std::span<const uint8_t> scales, uint8_t base,
                               std::span<std::array<uint64_t, 256>, kMaxPlanes> per_group) {
    const unsigned bb = block_bytes(d);  // 8 or 16: whole steps of 8 below
    const auto group = group_table(d, base);
    for (size_t b = 0; b < scales.size(); ++b) {
        auto& h = per_group[group[scales[b]]];
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
    if (keeps_blocks(d)) {
        std::copy(in.begin(), in.begin() + static_cast<long>(scales.size() * bb), planes[0]);
        return;
    }
    std::array<uint8_t*, kMaxPlanes> at{};
    std::copy(planes.begin(), planes.end(), at.begin());
    const auto group = group_table(d, base);
    for (size_t b = 0; b < scales.size(); ++b) {
        uint8_t*& dst = at[group[scales[b]]];
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
    if (keeps_blocks(d)) {
        std::copy(planes[0], planes[0] + scales.size() * bb, out.begin());
        return;
    }
    const auto group = group_table(d, base);
    if (bb == 16) merge_blocks<16>(planes, scales, group, out);
    else merge_blocks<8>(planes, scales, group, out);
}

}  // namespace ptwm
