// FP8 E4M3 test data: the byte nearest to a float, for tests that quantize
// generated weights themselves.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace ptwm {

// The E4M3 byte nearest to v, saturating at 448 (no NaN produced). A value
// that rounds to zero keeps its sign unless `negative_zero` is false.
inline uint8_t to_e4m3(float v, bool negative_zero = true) {
    const float a = std::min(std::fabs(v), 448.f);
    uint8_t best = 0;
    float best_err = a;
    for (unsigned b = 1; b < 0x7F; ++b) {
        const unsigned e = b >> 3, m = b & 7;
        const float x = e ? std::ldexp(1.f + m / 8.f, static_cast<int>(e) - 7) : std::ldexp(m / 8.f, -6);
        if (std::fabs(x - a) < best_err) best_err = std::fabs(x - a), best = static_cast<uint8_t>(b);
    }
    const bool negative = std::signbit(v) && (best != 0 || negative_zero);
    return negative ? static_cast<uint8_t>(0x80 | best) : best;
}

}  // namespace ptwm
