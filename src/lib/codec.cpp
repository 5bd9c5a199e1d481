#include "ptwm/codec.hpp"

#include <zstd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>

#include "ptwm/adaptive_coder.hpp"
#include "ptwm/error.hpp"
#include "rans.hpp"
#include "scratch.hpp"
#include "tensor_models.hpp"

namespace ptwm {
namespace {

// A slower codec replaces a faster one only when it saves more than this
// share of the plane: a near tie is not worth the decode time.
constexpr double kTieMargin = 0.01;
// zstd is tried on a sample first at middle levels; only a plane whose sample
// beats the order-0 bound by this factor gets a full zstd attempt.
// The sample is the plane's first 4 KiB: repetition that zstd can use shows
// there as well as in 16 KiB (on no corpus plane above 4 KiB did the two
// verdicts differ), at a quarter of the cost, and MXFP4 files have hundreds
// of planes where the sample is all the zstd work. Below 1 KiB the full
// attempt is as cheap as a sample.
constexpr size_t kZstdSample = 4u << 10;
constexpr size_t kZstdTiny = 1u << 10;
constexpr double kZstdSampleWin = 0.9;
// The adaptive coder decodes at tens of MB/s: it is only tried on planes this
// small, where a static coder's table is a large share of the output.
constexpr size_t kAdaptiveMax = 4u << 10;
// ... and it decodes some fifty times slower than rANS, so it must win by more.
constexpr double kAdaptiveMargin = 0.05;
// The scale model decodes at about 50 MB/s: tried on low-entropy byte planes
// up to this size (block scale tensors are 1/16 or 1/32 of their blocks).
constexpr size_t kScaleModelMax = 1u << 20;

int zstd_level_for(int level) {
    static constexpr std::array<int, 10> kMap = {1, 1, 1, 3, 5, 7, 9, 12, 16, 19};
    return kMap[std::clamp(level, 0, 9)];
}

std::vector<uint8_t> rans_encode(Codec c, std::span<const uint8_t> plane) {
    return rans::encode(plane, c == Codec::rans1 ? 1 : 0);
}

std::vector<uint8_t> zstd_encode(std::span<const uint8_t> plane, int level) {
    // One context per thread: creating one per call costs more than
    // compressing a small plane.
    thread_local std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> ctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
    thread_local Scratch scratch;
    const auto out = scratch.get(ZSTD_compressBound(plane.size()));
    const size_t r = ZSTD_compressCCtx(ctx.get(), out.data(), out.size(), plane.data(), plane.size(), level);
    if (ZSTD_isError(r)) throw Error(std::string("zstd encoder failed: ") + ZSTD_getErrorName(r));
    return {out.begin(), out.begin() + static_cast<long>(r)};
}

bool all_equal(std::span<const uint8_t> plane) {
    return std::all_of(plane.begin(), plane.end(), [&](uint8_t b) { return b == plane[0]; });
}

}  // namespace

bool is_known(Codec c) { return static_cast<uint8_t>(c) <= static_cast<uint8_t>(Codec::fp4_model); }

std::string_view name(Codec c) {
    switch (c) {
        case Codec::raw: return "raw";
        case Codec::constant: return "constant";
        case Codec::zstd: return "zstd";
        case Codec::rans0: return "rans0";
        case Codec::rans1: return "rans1";
        case Codec::adaptive: return "adaptive";
        case Codec::scale_model: return "scale-model";
        case Codec::f8_model: return "f8-model";
        case Codec::fp4_model: return "fp4-model";
    }
    return "unknown";
}

void add_to_histogram(std::span<const uint8_t> bytes, Histogram& h) {
    // Four tables break the store-to-load dependency between equal
    // neighbouring bytes (an exponent plane is mostly one or two values).
    std::array<std::array<uint32_t, 256>, 4> part{};
    size_t i = 0;
    for (; i + 4 <= bytes.size(); i += 4) {
        ++part[0][bytes[i]];
        ++part[1][bytes[i + 1]];
        ++part[2][bytes[i + 2]];
        ++part[3][bytes[i + 3]];
    }
    for (; i < bytes.size(); ++i) ++part[0][bytes[i]];
    for (size_t v = 0; v < 256; ++v) h[v] += uint64_t{part[0][v]} + part[1][v] + part[2][v] + part[3][v];
}

double order0_bits(const Histogram& h) {
    uint64_t total = 0;
    for (uint64_t c : h) total += c;
    double bits = 0;
    const double n = static_cast<double>(total);
    for (uint64_t c : h)
        if (c) bits -= static_cast<double>(c) * std::log2(static_cast<double>(c) / n);
    return bits;
}

double order0_bits(std::span<const uint8_t> bytes) {
    Histogram h{};
    add_to_histogram(bytes, h);
    return order0_bits(h);
}

double order0_nibble_bits(std::span<const uint8_t> bytes) {
    if (bytes.empty()) return 0;
    std::array<uint64_t, 16> count{};
    for (uint8_t b : bytes) ++count[b & 15], ++count[b >> 4];
    double bits = 0;
    const double n = 2.0 * static_cast<double>(bytes.size());
    for (uint64_t c : count)
        if (c) bits -= static_cast<double>(c) * std::log2(static_cast<double>(c) / n);
    return bits;
}

std::vector<uint8_t> encode_with(Codec c, std::span<const uint8_t> plane, int zstd_level, const TensorLayout& layout) {
    switch (c) {
        case Codec::raw: return {plane.begin(), plane.end()};
        case Codec::constant:
            if (plane.empty() || !all_equal(plane)) throw Error("constant codec needs a plane of one repeated value");
            return {plane[0]};
        case Codec::zstd: return zstd_encode(plane, zstd_level);
        case Codec::rans0:
        case Codec::rans1: return rans_encode(c, plane);
        case Codec::adaptive: return adaptive::encode_bytes(plane, 0);
        case Codec::scale_model: return models::encode_scales(plane, layout);
        case Codec::f8_model: return models::encode_f8(plane, layout);
        case Codec::fp4_model: return models::encode_fp4(plane, layout);
    }
    throw Error("unknown codec " + std::to_string(static_cast<int>(c)));
}

EncodedPlane encode_plane(std::span<const uint8_t> plane, const EncodeOptions& opt, const TensorLayout* whole) {
    const size_t n = plane.size();
    if (n == 0) return {Codec::raw, {}};
    if (all_equal(plane)) return {Codec::constant, {plane[0]}};

    EncodedPlane best{Codec::raw, {}};
    size_t best_size = n;
    // Candidates in order of decode speed; each must beat the one before by
    // more than the tie margin.
    auto consider = [&](Codec c, std::vector<uint8_t>&& payload, double margin = kTieMargin) {
        if (static_cast<double>(payload.size()) < static_cast<double>(best_size) - margin * static_cast<double>(n)) {
            best_size = payload.size();
            best = {c, std::move(payload)};
        }
    };

    const double bound_bytes = order0_bits(plane) / 8;
    if (bound_bytes < static_cast<double>(n) * (1 - kTieMargin)) consider(Codec::rans0, rans_encode(Codec::rans0, plane));

    if (opt.level >= 2) {
        const int zlevel = zstd_level_for(opt.level);
        bool worth_full = opt.level >= 6 || n <= kZstdTiny;
        if (!worth_full) {
            const auto sample = plane.first(std::min(n, kZstdSample));
            worth_full = static_cast<double>(zstd_encode(sample, 1).size()) <
                         kZstdSampleWin * order0_bits(sample) / 8;
        }
        if (worth_full) consider(Codec::zstd, zstd_encode(plane, zlevel));
    }
    // Order-1 context pays on correlated low-entropy streams such as block
    // scales; it decodes slower, so it is tried only where it may win big.
    if (opt.level >= 3 && bound_bytes < static_cast<double>(n) / 2 && (opt.level >= 7 || n <= kAdaptiveMax))
        consider(Codec::rans1, rans_encode(Codec::rans1, plane));
    // An order-0 adaptive coder lands near the bound plus a small learning
    // cost; it can only win by its margin where the best so far is further
    // than that above the bound (a static table too large for the plane).
    if (opt.level >= 2 && n <= kAdaptiveMax &&
        static_cast<double>(best_size) - bound_bytes > kAdaptiveMargin * static_cast<double>(n))
        consider(Codec::adaptive, adaptive::encode_bytes(plane, 0), kAdaptiveMargin);
    // The context models, where the plane is a whole tensor's bytes of their dtype.
    if (whole && whole->dtype) {
        const DType t = *whole->dtype;
        if ((t == DType::U8 || t == DType::F8_E8M0) && opt.level >= 2 && n <= kScaleModelMax &&
            bound_bytes < static_cast<double>(n) / 2)
            consider(Codec::scale_model, models::encode_scales(plane, *whole));
        // Any saving is worth its decode time at these levels.
        if (t == DType::F8_E4M3 && opt.level >= kContextModelLevel)
            consider(Codec::f8_model, models::encode_f8(plane, *whole), 0);
    }

    if (best.codec == Codec::raw) best.payload.assign(plane.begin(), plane.end());
    return best;
}

void decode_plane(Codec c, std::span<const uint8_t> payload, std::span<uint8_t> out, const TensorLayout& layout) {
    switch (c) {
        case Codec::raw:
            if (payload.size() != out.size())
                throw CorruptData("raw plane of " + std::to_string(payload.size()) + " bytes where " +
                                  std::to_string(out.size()) + " are expected");
            if (!out.empty()) std::memcpy(out.data(), payload.data(), out.size());
            return;
        case Codec::constant:
            if (payload.size() != 1) throw CorruptData("constant plane payload is not one byte");
            if (!out.empty()) std::memset(out.data(), payload[0], out.size());
            return;
        case Codec::zstd: {
            thread_local std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
            const size_t r = ZSTD_decompressDCtx(ctx.get(), out.data(), out.size(), payload.data(), payload.size());
            if (ZSTD_isError(r)) throw CorruptData(std::string("zstd plane: ") + ZSTD_getErrorName(r));
            if (r != out.size())
                throw CorruptData("zstd plane decodes to " + std::to_string(r) + " bytes where " +
                                  std::to_string(out.size()) + " are expected");
            return;
        }
        case Codec::rans0:
        case Codec::rans1: {
            if (!rans::decode(payload, out))
                throw CorruptData("rANS plane does not decode to " + std::to_string(out.size()) + " bytes");
            return;
        }
        case Codec::adaptive: adaptive::decode_bytes(payload, out); return;
        case Codec::scale_model: models::decode_scales(payload, out, layout); return;
        case Codec::f8_model: models::decode_f8(payload, out, layout); return;
        case Codec::fp4_model: models::decode_fp4(payload, out, layout); return;
    }
    throw CorruptData("unknown codec id " + std::to_string(static_cast<int>(c)));
}

}  // namespace ptwm
