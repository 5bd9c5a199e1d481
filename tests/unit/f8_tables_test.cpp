// Codec 9, f8-tables: exact round trips under every choice the encoder can
// make, its choice beating the order-0 bound where columns differ in scale,
// and damaged payloads failing as CorruptData.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "codecs/f8_tables.hpp"
#include "e4m3.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/codecs/codec.hpp"

namespace ptwm {
namespace {

// An FP8 kernel [rows, cols] whose columns have scales spread over 16x, as
// output channels of a trained layer do, quantised with one tensor scale.
std::vector<uint8_t> fp8_kernel(size_t rows, size_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0, 1);
    std::vector<float> col_scale(cols);
    for (auto& s : col_scale) s = std::exp2(4.f * static_cast<float>(rng() % 1000) / 1000.f);
    std::vector<float> w(rows * cols);
    float absmax = 0;
    for (size_t i = 0; i < w.size(); ++i) absmax = std::max(absmax, std::fabs(w[i] = normal(rng) * col_scale[i % cols]));
    std::vector<uint8_t> out(w.size());
    for (size_t i = 0; i < w.size(); ++i) out[i] = to_e4m3(w[i] / absmax * 448.f);
    return out;
}

void expect_round_trip(std::span<const uint8_t> in, const std::vector<uint8_t>& payload, const char* what) {
    std::vector<uint8_t> out(in.size(), 0xAA);
    f8tables::decode(payload, out);
    ASSERT_TRUE(std::equal(out.begin(), out.end(), in.begin(), in.end())) << what;
}

TEST(F8Tables, EveryChoiceRoundTripsAtAnyOffsetAndLength) {
    const auto kernel = fp8_kernel(97, 64, 1);
    std::vector<uint8_t> any(3001);
    std::mt19937 rng(2);
    for (auto& b : any) b = static_cast<uint8_t>(rng());  // every byte value, NaN patterns included
    const std::vector<uint64_t> shape = {97, 64}, odd = {3001}, none = {};
    for (const auto& [bytes, sh] : {std::pair{std::span<const uint8_t>(kernel), shape},
                                    std::pair{std::span<const uint8_t>(any), odd},
                                    std::pair{std::span<const uint8_t>(any), none}})
        for (size_t len : {size_t{0}, size_t{1}, size_t{3}, size_t{5}, size_t{1000}, bytes.size()})
            for (uint64_t offset : {uint64_t{0}, uint64_t{13}})
                for (unsigned log2k = 0; log2k <= 3; ++log2k)
                    for (unsigned prec : {10u, 12u, 15u})
                        for (bool signs : {false, true})
                            for (bool wide : {false, true})
                                for (bool state_signs : {false, true}) {
                                    // Not layouts: the encoder refuses them.
                                    if ((signs && wide) || (state_signs && (!wide || prec > 12))) continue;
                                    const auto in = bytes.subspan(offset, std::min(len, bytes.size() - offset));
                                    const TensorLayout layout{sh, offset, DType::F8_E4M3, {}};
                                    expect_round_trip(in,
                                                      f8tables::encode_with(in, layout, {log2k, prec, signs, wide, state_signs}),
                                                      state_signs ? "forced choice, signs in the states"
                                                      : wide      ? "forced choice, 32 states"
                                                                  : "forced choice");
                                }
    for (size_t len : {size_t{1}, size_t{7}, kernel.size()}) {
        const auto in = std::span<const uint8_t>(kernel).first(len);
        expect_round_trip(in, f8tables::encode(in, {shape, 0, DType::F8_E4M3, {}}), "encoder's choice");
    }
}

// The encoder's counters are memory reused per thread, cleared as they are
// read (over the chunk's byte range only): a chunk's payload must not
// depend on what was coded before it. Chunks of every plan the encoder
// makes (column and row classes of a 2-D kernel, column classes of a 4-D
// one, a single class, a byte range narrower than the one before), each
// coded again after the others, come out the same.
TEST(F8Tables, APayloadDoesNotDependOnTheChunksCodedBefore) {
    const auto wide = fp8_kernel(64, 300, 5), kernel4d = fp8_kernel(72, 64, 6), row = fp8_kernel(1, 3456, 7);
    std::vector<uint8_t> narrow(4000);  // bytes 40..79 only (positive scales of a few binades)
    std::mt19937 rng(8);
    for (auto& b : narrow) b = static_cast<uint8_t>(40 + rng() % 40);
    const std::vector<uint64_t> s2d = {64, 300}, s4d = {3, 3, 8, 64}, s1 = {1, 3456}, sn = {40, 100};
    const std::vector<std::pair<std::span<const uint8_t>, TensorLayout>> chunks = {
        {wide, {s2d, 0, DType::F8_E4M3, {}}},
        {kernel4d, {s4d, 0, DType::F8_E4M3, {}}},
        {row, {s1, 0, DType::F8_E4M3, {}}},
        {narrow, {sn, 0, DType::F8_E4M3, {}}},
        {std::span<const uint8_t>(wide).subspan(150, 9000), {s2d, 150, DType::F8_E4M3, {}}},
    };
    std::vector<std::vector<uint8_t>> first;
    for (const auto& [bytes, layout] : chunks) first.push_back(f8tables::encode(bytes, layout));
    for (size_t k = chunks.size(); k-- > 0;) {
        EXPECT_EQ(f8tables::encode(chunks[k].first, chunks[k].second), first[k]) << "chunk " << k;
        expect_round_trip(chunks[k].first, first[k], "after other chunks");
    }
}

TEST(F8Tables, ColumnsOfDifferentScaleCodeBelowTheOrder0Bound) {
    // The bound no order-0 coder (rANS included) can beat: the contest must
    // pick f8-tables and land under it.
    const auto kernel = fp8_kernel(512, 128, 3);
    const std::vector<uint64_t> shape = {512, 128};
    const TensorLayout layout{shape, 0, DType::F8_E4M3, {}};
    const auto coded = encode_plane(kernel, {}, &layout);
    EXPECT_EQ(coded.codec, Codec::f8_tables);
    const double bound = order0_bits(kernel) / 8;
    EXPECT_LT(static_cast<double>(coded.payload.size()), 0.99 * bound);
    std::vector<uint8_t> out(kernel.size());
    decode_plane(coded.codec, coded.payload, out);  // no layout needed
    EXPECT_EQ(out, kernel);
}

// The wide layout (32 states, decoded 32 bytes a round with SIMD where the
// CPU has it, byte by byte near the payload's end and elsewhere): a kernel
// large enough for many rounds, every class count. Writers before the
// state-signs layout chose it from 128 KiB; their stores must still read.
TEST(F8Tables, WideLayoutRoundTrips) {
    const auto kernel = fp8_kernel(1400, 96, 6);
    const std::vector<uint64_t> shape = {1400, 96};
    for (bool simd : {true, false}) {
        f8tables::allow_simd(simd);
        for (uint64_t offset : {uint64_t{0}, uint64_t{5}, uint64_t{96 * 7 + 40}})
            for (unsigned log2k = 0; log2k <= 3; ++log2k)
                for (unsigned prec : {10u, 15u}) {
                    const auto in = std::span<const uint8_t>(kernel).subspan(offset);
                    expect_round_trip(in, f8tables::encode_with(in, {shape, offset, DType::F8_E4M3, {}}, {log2k, prec, false, true}),
                                      simd ? "wide" : "wide, byte by byte");
                }
    }
    f8tables::allow_simd(true);
    const TensorLayout layout{shape, 0, DType::F8_E4M3, {}};
    const auto wide = f8tables::encode_with(kernel, layout, {3, 12, false, true});
    // 32 states cost 112 bytes more than 4, nothing else.
    const auto narrow = f8tables::encode_with(kernel, layout, {3, 12, false, false});
    EXPECT_LE(wide.size(), narrow.size() + 112 + 2);
    // Coded signs are not part of the wide layout.
    auto bad = wide;
    bad[0] |= 4;
    std::vector<uint8_t> out(kernel.size());
    EXPECT_THROW(f8tables::decode(bad, out), CorruptData);
    // Cut anywhere: refused.
    for (size_t cut = 0; cut < wide.size(); cut += 97) {
        const std::vector<uint8_t> part(wide.begin(), wide.begin() + static_cast<std::ptrdiff_t>(cut));
        EXPECT_THROW(f8tables::decode(part, out), CorruptData) << "cut at " << cut;
    }
}

// The state-signs layout (32 or 64 states starting from the last 960 or
// 1920 signs, one-word table slots, SIMD 32 or 64 bytes a round): lengths
// around its rounds and around the signs the states carry, with and
// without SIMD, and the encoder's choice from 2 KiB, costing only its
// states over 4 lanes.
// The decoders a test runs the state-signs layout through: AVX-512 (or the
// best the CPU has), AVX2 with either gather, none.
constexpr const char* kSimdModes[] = {"best SIMD, 16-lane gathers", "best SIMD, 8-lane gathers", "AVX2, vpgatherdd",
                                      "AVX2, scalar loads", "no SIMD"};
void use_simd(const char* mode) {
    f8tables::allow_simd(mode != kSimdModes[4]);
    if (mode == kSimdModes[2] || mode == kSimdModes[3]) f8tables::allow_avx512(false);
    f8tables::force_gather_lanes(mode == kSimdModes[0] ? 16 : mode == kSimdModes[1] || mode == kSimdModes[2] ? 8
                                 : mode == kSimdModes[3]                           ? 1
                                                                                   : 0);
}
// Back to the best the CPU has, with its own gathers.
void use_best_simd() {
    f8tables::allow_simd(true);
    f8tables::force_gather_lanes(0);
}

TEST(F8Tables, StateSignsLayoutRoundTripsAndIsTheEncodersChoice) {
    const auto kernel = fp8_kernel(1400, 96, 8);
    const std::vector<uint64_t> shape = {1400, 96};
    for (const char* simd : kSimdModes) {
        use_simd(simd);
        for (size_t len : {size_t{1}, size_t{63}, size_t{64}, size_t{129}, size_t{1919}, size_t{1920}, size_t{1921},
                           size_t{2049}, size_t{20000}, kernel.size() - 96 * 7 - 40})
            for (uint64_t offset : {uint64_t{0}, uint64_t{96 * 7 + 40}})
                for (unsigned log2k = 0; log2k <= 3; ++log2k)
                    for (unsigned prec : {10u, 12u, 14u})
                        for (bool sixty_four : {false, true}) {
                            if (prec > 12 && len < 1919) continue;  // a symbol above 2^12 of 2^14 slots: refused
                            const auto in = std::span<const uint8_t>(kernel).subspan(offset, len);
                            expect_round_trip(in,
                                              f8tables::encode_with(in, {shape, offset, DType::F8_E4M3, {}},
                                                                    {log2k, prec, false, true, true, sixty_four}),
                                              simd);
                        }
    }
    use_best_simd();
    const TensorLayout layout{shape, 0, DType::F8_E4M3, {}};
    const auto chosen = f8tables::encode(std::span<const uint8_t>(kernel).first(2048), layout);
    EXPECT_EQ(chosen[0] & 24, 24) << "a 2 KiB chunk takes the state-signs layout";
    EXPECT_EQ(f8tables::encode(std::span<const uint8_t>(kernel).first(16383), layout)[0] & 56, 24)
        << "below 16 KiB, 32 states";
    EXPECT_EQ(f8tables::encode(std::span<const uint8_t>(kernel).first(16384), layout)[0] & 56, 56)
        << "from 16 KiB, 64";
    const auto full = f8tables::encode(kernel, layout);
    EXPECT_EQ(full[0] & 56, 56) << "a 131 KiB chunk takes 64 states";
    // The tables' slots fit the decoder's L1 budget: 2^13 words in all.
    EXPECT_LE((full[0] & 3u) + full[1], 13u) << "classes " << (1u << (full[0] & 3u)) << " of " << unsigned{full[1]} << " bits";
    expect_round_trip(kernel, full, "encoder's choice");
    // 64 states carry 1920 signs: about 3.5 bits a packed state lost
    // (srans::States::packed), against 4 states' some 9 bits each; and the
    // precision is at most 12 bits.
    const auto narrow = f8tables::encode_with(kernel, layout, {full[0] & 3u, full[1], false, false});
    EXPECT_LE(full.size(), narrow.size() + 96);
    // The plane contest gives the SIMD layouts no speed margin against rANS.
    EXPECT_TRUE(f8tables::simd_layout(full));
    EXPECT_FALSE(f8tables::simd_layout(narrow));
    EXPECT_FALSE(f8tables::simd_layout({}));
    std::vector<uint8_t> out(kernel.size());
    for (auto [flags, why] : {std::pair{full[0] & ~8u, "state signs without the wide layout"},
                              std::pair{full[0] | 4u, "coded signs in it"}, std::pair{(full[0] & ~16u) | 64u, "row classes without state signs"},
                              std::pair{(full[0] & ~16u) | 32u, "64 states without state signs"}}) {
        auto bad = full;
        bad[0] = static_cast<uint8_t>(flags);
        EXPECT_THROW(f8tables::decode(bad, out), CorruptData) << why;
    }
    for (size_t cut = 0; cut < full.size(); cut += 97) {
        const std::vector<uint8_t> part(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(cut));
        EXPECT_THROW(f8tables::decode(part, out), CorruptData) << "cut at " << cut;
    }
    // Row classes: every class count, lengths and offsets that start and
    // end inside rows, one-row chunks; refused without classes.
    for (const char* simd : kSimdModes) {
        use_simd(simd);
        for (size_t len : {size_t{1}, size_t{95}, size_t{97}, size_t{2049}, size_t{20000}})
            for (uint64_t offset : {uint64_t{0}, uint64_t{96 * 7 + 40}})
                for (unsigned log2k = 1; log2k <= 3; ++log2k) {
                    const auto in = std::span<const uint8_t>(kernel).subspan(offset, len);
                    expect_round_trip(in,
                                      f8tables::encode_with(in, {shape, offset, DType::F8_E4M3, {}},
                                                            {log2k, 12, false, true, true, len > 4096, true}),
                                      simd);
                }
    }
    // Row classes in chunks above the default size, and in rows shorter
    // than a round of 64 states (48 bytes: the SIMD rounds take them by their
    // rows with 32 states, by an offset a byte with 64), at any phase.
    {
        const auto big = fp8_kernel(3000, 96, 11), short_rows = fp8_kernel(2000, 48, 12);  // 288,000, 96,000 bytes
        const std::vector<uint64_t> big_shape = {3000, 96}, short_shape = {2000, 48};
        for (const char* simd : kSimdModes) {
            use_simd(simd);
            for (size_t len : {size_t{256} << 10, big.size()}) {
                const auto in = std::span<const uint8_t>(big).first(len);
                expect_round_trip(in,
                                  f8tables::encode_with(in, {big_shape, 0, DType::F8_E4M3, {}},
                                                        {2, 12, false, true, true, true, true}),
                                  simd);
            }
            for (bool sixty_four : {false, true})
                for (uint64_t offset : {uint64_t{0}, uint64_t{48 * 5 + 17}}) {
                    const auto in = std::span<const uint8_t>(short_rows).subspan(offset, 20000);
                    expect_round_trip(in,
                                      f8tables::encode_with(in, {short_shape, offset, DType::F8_E4M3, {}},
                                                            {3, 11, false, true, true, sixty_four, true}),
                                      simd);
                }
        }
    }
    use_best_simd();
    EXPECT_THROW(f8tables::encode_with(kernel, layout, {0, 12, false, true, true, false, true}), Error);
    {
        auto rows = f8tables::encode_with(kernel, layout, {2, 12, false, true, true, true, true});
        auto bad = rows;
        bad[0] = static_cast<uint8_t>(bad[0] & ~3u);  // row classes, no classes
        EXPECT_THROW(f8tables::decode(bad, out), CorruptData);
        bad = rows;
        bad[0] = static_cast<uint8_t>(bad[0] & ~16u & ~32u & ~8u);  // row classes in the 4-state layout
        EXPECT_THROW(f8tables::decode(bad, out), CorruptData);
        for (size_t cut = 0; cut < rows.size(); cut += 211) {
            const std::vector<uint8_t> part(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(cut));
            EXPECT_THROW(f8tables::decode(part, out), CorruptData) << "cut at " << cut;
        }
    }
    // Rows of a kernel whose rows differ in scale, as output channels of
    // [out, in] weights quantised per channel or per 128x128 block: the
    // encoder takes row classes, and they code smaller than column ones.
    {
        auto by_rows = fp8_kernel(96, 1400, 9);  // columns differ: transposed, rows do
        std::vector<uint8_t> t(by_rows.size());
        for (size_t r = 0; r < 1400; ++r)
            for (size_t c = 0; c < 96; ++c) t[r * 96 + c] = by_rows[c * 1400 + r];
        const std::vector<uint64_t> tshape = {1400, 96};
        const TensorLayout tl{tshape, 0, DType::F8_E4M3, {}};
        const auto chosen_rows = f8tables::encode(t, tl);
        EXPECT_EQ(chosen_rows[0] & 64, 64) << "rows of different scale take row classes";
        expect_round_trip(t, chosen_rows, "encoder's row classes");
        const auto by_cols = f8tables::encode_with(t, tl, {3, chosen_rows[1], false, true, true, true, false});
        EXPECT_LT(chosen_rows.size(), by_cols.size());
    }
    // One byte value all through: at 13 bits its frequency (all 2^13 slots)
    // fits no slot word, and the encoder refuses the forced choice; at 12
    // it fits (2^12), which its own choice may use.
    const std::vector<uint8_t> flat(5000, 0x38);
    const std::vector<uint64_t> flat_shape = {5000};
    const TensorLayout flat_layout{flat_shape, 0, DType::F8_E4M3, {}};
    EXPECT_THROW(f8tables::encode_with(flat, flat_layout, {0, 13, false, true, true}), Error);
    expect_round_trip(flat, f8tables::encode_with(flat, flat_layout, {0, 12, false, true, true}), "one value, 12 bits");
    expect_round_trip(flat, f8tables::encode(flat, flat_layout), "one value, the encoder's choice");
    // A chunk shorter than the one coded (the final states then carry
    // other signs, or a sign past its end): refused.
    const auto small = std::span<const uint8_t>(kernel).first(100);
    const auto tail = f8tables::encode_with(small, layout, {0, 12, false, true, true});
    std::vector<uint8_t> small_out(small.size());
    EXPECT_NO_THROW(f8tables::decode(tail, small_out));
    small_out.resize(99);
    EXPECT_THROW(f8tables::decode(tail, small_out), CorruptData);
    // Every byte flipped: refused or decoded to other bytes, never a crash.
    const auto mid = std::span<const uint8_t>(kernel).first(3000);
    const auto good = f8tables::encode_with(mid, layout, {2, 11, false, true, true});
    std::vector<uint8_t> mid_out(mid.size());
    for (size_t at = 0; at < good.size(); ++at) {
        auto bad = good;
        bad[at] ^= 0x5A;
        try {
            f8tables::decode(bad, mid_out);
        } catch (const CorruptData&) {
        }
    }
}

// E5M2 kernels take the same tables: any byte is a magnitude and a sign.
// The SIMD encoders (AVX-512, 16 states a vector, exact quotients from a
// refined reciprocal and one correction; AVX2, 8 states a vector, put()'s
// own reciprocal) must write the byte-by-byte encoder's bytes: every layout it serves, class counts, row classes,
// precisions up to 15 bits (the wide layout's), lengths around whole rounds,
// offsets inside rows (some hundred thousand quotients, some of them
// integers, where the reciprocal may fall short). On CPUs without them the
// runs are the byte-by-byte encoder.
// Stores written before packed final states (flag 128 clear: four bytes a
// state) still decode, in every layout; the packed ones are smaller.
TEST(F8Tables, StreamsWithFourByteStatesStillDecode) {
    const auto kernel = fp8_kernel(400, 96, 9);
    const std::vector<uint64_t> shape = {400, 96};
    const TensorLayout layout{shape, 0, DType::F8_E4M3, {}};
    const f8tables::Choice choices[] = {
        {2, 12, false, false},                     // 4 states, raw signs
        {2, 12, true, false},                      // 4 states, coded signs
        {2, 12, false, true},                      // 32 states
        {2, 12, false, true, true},                // 32 states with the last signs
        {2, 12, false, true, true, true},          // 64
        {2, 12, false, true, true, false, true}};  // 32, classes per row
    for (f8tables::Choice ch : choices) {
        ch.packed_states = false;
        const auto words = f8tables::encode_with(kernel, layout, ch);
        ch.packed_states = true;
        const auto packed = f8tables::encode_with(kernel, layout, ch);
        EXPECT_EQ(words[0] & 128, 0);
        EXPECT_EQ(packed[0], words[0] | 128);
        EXPECT_LT(packed.size(), words.size()) << "flags " << unsigned{packed[0]};
        for (const char* simd : kSimdModes) {
            use_simd(simd);
            expect_round_trip(kernel, words, simd);
            expect_round_trip(kernel, packed, simd);
        }
        use_best_simd();
        // Either read as the other layout: the states and words misread,
        // refused (these payloads; not a check a decoder can always make).
        std::vector<uint8_t> out(kernel.size());
        auto flipped = packed;
        flipped[0] &= 0x7F;
        EXPECT_THROW(f8tables::decode(flipped, out), CorruptData) << "flags " << unsigned{packed[0]};
        flipped = words;
        flipped[0] |= 0x80;
        EXPECT_THROW(f8tables::decode(flipped, out), CorruptData) << "flags " << unsigned{words[0]};
    }
}

TEST(F8Tables, SimdEncoderWritesTheScalarEncodersBytes) {
    const auto kernel = fp8_kernel(1400, 96, 11);
    std::vector<uint8_t> any(70000);
    std::mt19937 rng(12);
    for (auto& b : any) b = static_cast<uint8_t>(rng());  // flat: frequencies of 1 and renormalisation everywhere
    const std::vector<uint64_t> shape = {1400, 96}, flat = {70000};
    for (const auto& [bytes, sh] : {std::pair{std::span<const uint8_t>(kernel), shape}, std::pair{std::span<const uint8_t>(any), flat}})
        for (size_t len : {size_t{31}, size_t{64}, size_t{65}, size_t{2048}, size_t{4097}, size_t{65536}})
            for (uint64_t offset : {uint64_t{0}, uint64_t{96 * 7 + 40}})
                for (unsigned log2k = 0; log2k <= 3; ++log2k)
                    for (unsigned prec : {10u, 12u, 15u})
                        for (int layout = 0; layout < 4; ++layout) {  // wide; state signs 32, 64; rows
                            const bool state_signs = layout > 0, rows = layout == 3;
                            if ((state_signs && prec > 12) || (rows && (!log2k || sh.size() != 2))) continue;
                            const auto in = bytes.subspan(offset, len);
                            const TensorLayout where{sh, offset, DType::F8_E4M3, {}};
                            const f8tables::Choice choice{log2k, prec, false, true, state_signs, layout >= 2, rows};
                            f8tables::allow_simd(true);
                            const auto simd = f8tables::encode_with(in, where, choice);
                            f8tables::allow_avx512(false);
                            const auto avx2 = f8tables::encode_with(in, where, choice);
                            f8tables::allow_simd(false);
                            const auto scalar = f8tables::encode_with(in, where, choice);
                            f8tables::allow_simd(true);
                            ASSERT_EQ(simd, scalar) << "len " << len << " offset " << offset << " classes " << (1 << log2k)
                                                    << " prec " << prec << " layout " << layout;
                            ASSERT_EQ(avx2, scalar) << "AVX2, len " << len << " offset " << offset << " classes "
                                                    << (1 << log2k) << " prec " << prec << " layout " << layout;
                            expect_round_trip(in, simd, "SIMD encoder");
                        }
}

// Bytes of one sign (block scales, exponents below 128; or all negative)
// with coded signs: the sign symbol holds every slot, and the decoder takes
// the raw-sign loop with the signs all equal. Every class count, lengths
// around its rounds of four, and flipped bytes still refused or decoded
// without a crash.
TEST(F8Tables, ConstantCodedSignsRoundTrip) {
    const auto kernel = fp8_kernel(300, 64, 13);
    for (uint8_t sign : {uint8_t{0}, uint8_t{0x80}}) {
        std::vector<uint8_t> same(kernel.size());
        for (size_t i = 0; i < kernel.size(); ++i) same[i] = static_cast<uint8_t>((kernel[i] & 0x7F) | sign);
        const std::vector<uint64_t> shape = {300, 64};
        for (size_t len : {size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{1001}, same.size()})
            for (unsigned log2k = 0; log2k <= 3; ++log2k)
                for (unsigned prec : {10u, 14u}) {
                    const auto in = std::span<const uint8_t>(same).first(len);
                    const auto payload = f8tables::encode_with(in, {shape, 0, DType::F8_E4M3, {}}, {log2k, prec, true});
                    expect_round_trip(in, payload, "one sign, coded");
                }
        // The encoder's own choice for such bytes: coded signs.
        const auto chosen = f8tables::encode(same, {shape, 0, DType::F8_E4M3, {}});
        EXPECT_TRUE(chosen[0] & 4) << "coded signs for bytes of one sign";
        expect_round_trip(same, chosen, "encoder's choice, one sign");
        std::vector<uint8_t> out(same.size());
        for (size_t at = 0; at < chosen.size(); at += 7) {
            auto bad = chosen;
            bad[at] ^= 0x5A;
            try {
                f8tables::decode(bad, out);
            } catch (const CorruptData&) {
            }
        }
    }
}

TEST(F8Tables, E5M2ColumnsOfDifferentScaleCodeBelowTheOrder0BoundToo) {
    auto kernel = fp8_kernel(512, 128, 7);
    // E4M3 -> E5M2 by value would need rounding; bytes of a like shape do:
    // [S EEEE MMM] -> [S EEEEE MM] with the exponent rebiased (+8).
    for (auto& b : kernel) {
        const unsigned e = (b >> 3) & 15, m = b & 7;
        b = static_cast<uint8_t>((b & 0x80) | std::min(30u, e + 8) << 2 | m >> 1);
    }
    const std::vector<uint64_t> shape = {512, 128};
    const TensorLayout layout{shape, 0, DType::F8_E5M2, {}};
    const auto coded = encode_plane(kernel, {}, &layout);
    EXPECT_EQ(coded.codec, Codec::f8_tables);
    EXPECT_LT(static_cast<double>(coded.payload.size()), order0_bits(kernel) / 8);
    std::vector<uint8_t> out(kernel.size());
    decode_plane(coded.codec, coded.payload, out);
    EXPECT_EQ(out, kernel);
}

TEST(F8Tables, DamagedPayloadsAreCorruptDataNeverACrash) {
    const auto kernel = fp8_kernel(64, 32, 4);
    const std::vector<uint64_t> shape = {64, 32};
    const auto good = f8tables::encode_with(kernel, {shape, 0, DType::F8_E4M3, {}}, {2, 12, true});
    std::vector<uint8_t> out(kernel.size());
    // Cut anywhere: always refused (the stream must end exactly where it began).
    for (size_t cut = 0; cut < good.size(); cut += 7) {
        const std::vector<uint8_t> part(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut));
        EXPECT_THROW(f8tables::decode(part, out), CorruptData) << "cut at " << cut;
    }
    // Every byte flipped: refused or decoded to other bytes, never a crash.
    for (size_t at = 0; at < good.size(); ++at) {
        auto bad = good;
        bad[at] ^= 0x5A;
        try {
            f8tables::decode(bad, out);
        } catch (const CorruptData&) {
        }
    }
    // The final states read in the other layout (four bytes each).
    auto flags = good;
    flags[0] &= 0x7F;
    EXPECT_THROW(f8tables::decode(flags, out), CorruptData);
    auto prec = good;
    prec[1] = 16;
    EXPECT_THROW(f8tables::decode(prec, out), CorruptData);
}

}  // namespace
}  // namespace ptwm
