#include "codecs/pair_rans.hpp"

#include <algorithm>
#include <array>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/cpu_features.hpp"
#include "base/scratch.hpp"
#include "codecs/rans.hpp"
#include "ptwm/base/error.hpp"

namespace ptwm::pair_rans {
namespace {

// Replaces each pair in `bytes` by value[its low rank]; false where a rank
// is k or more or a pair's high rank is not the low rank before it (0
// before the first).
bool map_pairs_scalar(std::span<uint8_t> bytes, const std::array<uint8_t, 16>& value, unsigned k, uint8_t previous = 0) {
    unsigned wrong = 0, top = 0;
    for (uint8_t& y : bytes) {
        wrong |= static_cast<unsigned>(y >> 4) ^ previous;
        previous = y & 15;
        top = std::max<unsigned>(top, previous);
        y = value[previous];
    }
    return wrong == 0 && top < k;
}

#if defined(__x86_64__)
// The same 16 bytes at a time: the value by a byte shuffle of the table, the
// rank before each pair from the previous block's raw bytes. (The scalar
// loop, two table loads a byte, took as long as the order-1 decode itself.)
__attribute__((target("ssse3"))) bool map_pairs_ssse3(std::span<uint8_t> bytes, const std::array<uint8_t, 16>& value,
                                                      unsigned k) {
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(value.data()));
    const __m128i low = _mm_set1_epi8(0x0F);
    __m128i before = _mm_setzero_si128(), wrong = _mm_setzero_si128(), top = _mm_setzero_si128();
    size_t i = 0;
    for (; i + 16 <= bytes.size(); i += 16) {
        const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes.data() + i));
        const __m128i previous = _mm_and_si128(_mm_alignr_epi8(y, before, 15), low);
        const __m128i rank = _mm_and_si128(y, low);
        wrong = _mm_or_si128(wrong, _mm_xor_si128(_mm_and_si128(_mm_srli_epi16(y, 4), low), previous));
        top = _mm_max_epu8(top, rank);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(bytes.data() + i), _mm_shuffle_epi8(table, rank));
        before = y;
    }
    alignas(16) std::array<uint8_t, 16> last, tops;
    _mm_store_si128(reinterpret_cast<__m128i*>(last.data()), before);
    _mm_store_si128(reinterpret_cast<__m128i*>(tops.data()), top);
    const bool ok = _mm_movemask_epi8(_mm_cmpeq_epi8(wrong, _mm_setzero_si128())) == 0xFFFF &&
                    *std::max_element(tops.begin(), tops.end()) < k;
    return map_pairs_scalar(bytes.subspan(i), value, k, i ? last[15] & 15 : 0) && ok;
}
#endif

bool map_pairs(std::span<uint8_t> bytes, const std::array<uint8_t, 16>& value, unsigned k) {
#if defined(__x86_64__)
    if (cpu::has_ssse3()) return map_pairs_ssse3(bytes, value, k);
#endif
    return map_pairs_scalar(bytes, value, k);
}

}  // namespace

std::optional<std::vector<uint8_t>> encode(std::span<const uint8_t> plane) {
    std::array<bool, 256> present{};
    for (uint8_t b : plane) present[b] = true;
    std::vector<uint8_t> out = {0};
    std::array<uint8_t, 256> rank{};
    for (unsigned v = 0; v < 256; ++v)
        if (present[v]) {
            if (out[0] == kMaxSymbols) return std::nullopt;
            rank[v] = out[0]++;
            out.push_back(static_cast<uint8_t>(v));
        }
    thread_local Scratch pairs;
    const auto y = pairs.get(plane.size());
    uint8_t previous = 0;
    for (size_t i = 0; i < plane.size(); ++i) {
        const uint8_t r = rank[plane[i]];
        y[i] = static_cast<uint8_t>(previous << 4 | r);
        previous = r;
    }
    const auto coded = rans::encode(y, 1);
    out.insert(out.end(), coded.begin(), coded.end());
    return out;
}

void decode(std::span<const uint8_t> payload, std::span<uint8_t> out) {
    if (payload.empty() || payload[0] == 0 || payload[0] > kMaxSymbols || payload.size() < 1u + payload[0])
        throw CorruptData("pair-rANS plane: bad alphabet");
    const unsigned k = payload[0];
    for (unsigned s = 1; s < k; ++s)
        if (payload[1 + s] <= payload[s]) throw CorruptData("pair-rANS plane: alphabet out of order");
    if (!rans::decode(payload.subspan(1 + k), out))
        throw CorruptData("pair-rANS plane does not decode to " + std::to_string(out.size()) + " bytes");
    // Pair -> byte: the value of its low rank. A rank outside the alphabet,
    // or a high rank that is not the rank before, is damage.
    std::array<uint8_t, 16> value{};
    for (unsigned r = 0; r < k; ++r) value[r] = payload[1 + r];
    if (!map_pairs(out, value, k))
        throw CorruptData("pair-rANS plane: a rank outside its " + std::to_string(k) + " values, or a pair that does not follow the one before");
}

}  // namespace ptwm::pair_rans
