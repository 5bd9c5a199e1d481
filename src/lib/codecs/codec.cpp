#include "ptwm/codecs/codec.hpp"

#include <zstd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

#include "base/scratch.hpp"
#include "codecs/bit_pack.hpp"
#include "codecs/f8_tables.hpp"
#include "codecs/fp4_tables.hpp"
#include "codecs/pair_rans.hpp"
#include "codecs/rans.hpp"
#include "codecs/static_rans.hpp"
#include "codecs/tensor_models.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/codecs/adaptive_coder.hpp"

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
// Order-1 rANS below the archive levels: planes from kRans1Min to
// kAdaptiveMax. On smaller planes its 256 context tables cost more than
// order 1 saves: on the 33 corpus and derived files it won on two planes,
// both of 4 KiB, and none of the 29 attempts from 2 to 3 KiB (E4M3 and
// E8M0 scale tensors) won. Each attempt costs htscodecs' 1 MiB of symbol
// tables, cleared: 90 us a 2-3 KiB plane (the thread's first 600, with 300
// page faults), 5% of esrgan NVFP4's pack time from 2 KiB.
// Above kAdaptiveMax it is tried on the block scale tensors of large models
// (over kScaleModelTensorMax scales), where the scale model is not: their
// scales follow their row's level, which the previous scale gives. On a
// gpt-oss-like MXFP4 tensor's 256 KiB scale chunks order 1 codes 0.14 of
// their size where order 0 codes 0.22 (zstd -3 0.19), on NVFP4's E4M3
// scales 0.48 against 0.52, and those chunks decode at 1-1.4 GB/s in the
// 32-state layout. (On the float files' exponent planes and the small
// models' scale tensors above 4 KiB it never won, and its attempts cost
// up to a quarter of their pack time.)
// And above kAdaptiveMax on whole scale tensors (see is_scale_tensor) up
// to a chunk, where its floor says it may win: layouts the corpus lacks
// put a row's scales side by side at the row's level (compressed-tensors'
// MXFP4 weight_scale [out, in/32], MXFP8 and MXFP6 E8M0 scales, ModelOpt's
// NVFP4 E4M3 scales over many layers), and there order 1 coded 2,469 /
// 36,942 / 9,368 / 22,494 bytes where the contest's best had been 3,537 /
// 57,106 / 13,355 / 25,859 (zstd -19: 2,655 / 34,878 / 9,430 / 25,583).
// There its floor, a lower bound, is loose (a byte a pair of its table):
// it runs only where the floor is under kScaleRans1Reach of the best so
// far, and not on tensors of more than 64 values, where it has no floor
// (E4M3 scales of fine-grained NVFP4, which order 1 does not win). On the
// 15 corpus, derived and other-layout FP4 and MXFP8/MXFP6 files, of its
// 143 attempts on such tensors 80 won, all with a floor under 0.94 of the
// best; at 0.92 it runs 77 times, wins 76 (99.8% of the bytes order 1
// saved) and loses once; at 1.0 the 63 losing attempts (NVFP4's E4M3
// scales, 17-47 values) added a tenth to a fifth to those files' pack time.
constexpr size_t kRans1Min = 3u << 10;
constexpr double kScaleRans1Reach = 0.92;
// ... and it decodes some fifty times slower than rANS, so it must win by more.
constexpr double kAdaptiveMargin = 0.05;
// Below the archive levels only on planes up to this size: at 25-40 ns a
// byte, planes of 1-4 KiB took 11% of posenet F8's decode time, a third of
// posenet MXFP4's and a quarter of posenet F16's, for 0.01-0.1% of their
// size (the biases' smaller planes stayed; see the margin below).
constexpr size_t kAdaptiveFastMax = 256;
// ... and there it must save a quarter of the plane. At 0.05 it won 4-160
// planes a file on the corpus and derived files, biases' exponent planes
// of 24-256 bytes, a few bytes each: some 2.4% of posenet E5M2's decode
// time for 0.01% of its size. At 0.25 it wins 4 planes in all; of the 28
// corpus, derived and gpt-oss-like files 10 grew, by 0.011-0.023%, and the
// small ones decode 3-8% faster in memory (posenet E5M2 0.98x -> 1.06x
// zstd -d, posenet BF16 1.72x -> 1.78x; Zen 4, 2026-12-07).
constexpr double kAdaptiveFastMargin = 0.25;
// f8-tables in its four-state layouts decodes at 300-600 MB/s a core, a
// few times slower than SIMD rANS: FP8 weights are where it saves, and what
// it saves there (0.5-1.5%) is the whole gap to the bytes' entropy, so it
// needs only a small margin. Its SIMD layouts (FP8 chunks from 2 KiB)
// decode at 1.1-2 GB/s, as fast as htscodecs' AVX-512 order-0 rANS (1.8
// G symbols/s): no margin, and then order-0 rANS, which cannot go below
// the bound, is not tried where f8-tables already did (on the corpus's FP8
// files those attempts were 7% of the pack time and never won).
constexpr double kF8TablesMargin = f8tables::kContestMargin;
// On block scale tensors its payload is taken to be at least this share of
// order-0 rANS's (see encode_plane).
constexpr double kScaleF8TablesReach = 0.90;
// The scale model decodes at about 50 MB/s: tried on low-entropy byte planes
// up to this size (block scale tensors are 1/16 or 1/32 of their blocks).
constexpr size_t kScaleModelMax = 1u << 20;
// ... and below the archive levels only on tensors up to this size, the
// scale tensors of small models (the corpus's: at most 29 KiB). Those of
// large models (gpt-oss: MiBs a tensor, in 256 KiB chunks) keep the fast
// coders, as for scale-mix: decoded at some 60 MB/s next to fp4-tables'
// 1.2 GB/s on 16 times the bytes of blocks, the model doubled the read
// time of a gpt-oss-like [2880, 5760] MXFP4 tensor (unpack -j1 13.6 ->
// 28 ms) for 0.33% of its store; on a small model it is milliseconds a
// file, and it is what takes esrgan MXFP4's scales below their order-0
// bound (0.1241 against 0.1386).
constexpr uint64_t kScaleModelTensorMax = 64u << 10;
// scale-mix decodes at 20-55 MB/s (E4M3 / E8M0 scales), some ten times
// slower than rANS: it is tried only on whole scale tensors up to this
// size (FP4 tensors up to 1-2 MiB, the layers of small models). The scale
// tensors of large models (gpt-oss: MiBs a tensor, stored in 256 KiB
// chunks) keep the faster coders, and its encoder's search (a dozen to
// three dozen codings of the tensor) stays off their pack path.
constexpr size_t kScaleMixMax = 64u << 10;
// ... and replaces a faster coder when it saves this share of the best
// payload so far (not of the plane: see encode_plane). It is an archive
// level's coder (kContextModelLevel and up): at the default level it took
// the corpus's block scales below their order-0 bound (esrgan NVFP4 0.4376
// -> 0.4191, bound 0.4273; whole files 0.05-0.2% smaller) but made NVFP4
// files decode three times slower (243 -> 85 MB/s) and FP4 files pack two
// to five times slower.
constexpr double kScaleMixMargin = 0.002;
// Block scale tensors are small and repeat in ways no context of the scale
// model sees (whole rows of equal scales, periods of a flattened kernel):
// zstd at its top level finds them. It encodes at a few MB/s, so it is tried
// only on whole low-entropy tensors of this size, and only where level 3
// already comes within kScaleZstdReach of the best so far (at 25% it ran on
// every E4M3 scale tensor of the NVFP4 files, where it never wins, at
// some 3 MB/s). And only where level 3 took part in the contest (its
// sample found repetition): on the 10 corpus and derived FP4 files (and a
// gpt-oss-like MXFP4 file) level 19 came out smaller than the best other
// coder on 6 tensors, all of them such; coding level 3 anew for the
// others, then level 19 on the seven that came within reach, won nothing
// and took some 40 ms of movenet NVFP4's 80 ms pack. Whole tensors only: a
// large model's scale tensor has its first chunk at offset 0 too, and level
// 19 on it (100 ms for 256 KiB) took three quarters of a gpt-oss-like
// tensor's pack time for 2.5 KB against order-1 rANS (0.03% of it).
constexpr size_t kScaleZstdMax = 256u << 10;
constexpr double kScaleZstdReach = 1.05;
constexpr int kScaleZstdLevel = 19;

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

bool is_known(Codec c) { return static_cast<uint8_t>(c) <= static_cast<uint8_t>(Codec::bit_pack); }

bool is_context_model(Codec c) {
    return c == Codec::scale_model || c == Codec::f8_model || c == Codec::fp4_model || c == Codec::scale_mix;
}

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
        case Codec::f8_tables: return "f8-tables";
        case Codec::fp4_tables: return "fp4-tables";
        case Codec::scale_mix: return "scale-mix";
        case Codec::rans2: return "rans2";
        case Codec::bit_pack: return "bit-pack";
    }
    return "unknown";
}

void add_to_histogram(std::span<const uint8_t> bytes, Histogram& h) {
    // Small planes (FP4 files have thousands) count straight into h: the
    // four tables below cost more to clear and merge than they save.
    if (bytes.size() < 2048) {
        for (uint8_t b : bytes) ++h[b];
        return;
    }
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

// n log2 n - sum c log2 c, each term from srans' table below 4096: a
// log2 a symbol was a twentieth of the pack time of files of small tensors
// (a few hundred planes of a few hundred bytes, each counted several times).
double order0_bits(const Histogram& h) {
    uint64_t total = 0;
    double sum = 0;
    for (uint64_t c : h) total += c, sum += srans::k_log2_k(c);
    return srans::k_log2_k(total) - sum;
}

double order0_bits(std::span<const uint8_t> bytes) {
    Histogram h{};
    add_to_histogram(bytes, h);
    return order0_bits(h);
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
        case Codec::scale_mix: return models::encode_scale_mix(plane, layout);
        case Codec::rans2:
            if (auto payload = pair_rans::encode(plane)) return std::move(*payload);
            throw Error("rans2 codes planes of at most 16 distinct byte values");
        case Codec::f8_model: return models::encode_f8(plane, layout);
        case Codec::fp4_model: return models::encode_fp4(plane, layout);
        case Codec::f8_tables: return f8tables::encode(plane, layout);
        case Codec::bit_pack: return bit_pack::encode(plane);
        case Codec::fp4_tables: {
            // MX blocks hold 16 bytes a scale, NV blocks 8.
            if (layout.scales.empty() || plane.size() % layout.scales.size() != 0)
                throw Error("fp4-tables needs one block scale per block");
            const size_t bb = plane.size() / layout.scales.size();
            if (bb != 8 && bb != 16) throw Error("fp4-tables codes blocks of 8 or 16 bytes");
            return fp4tables::encode(plane, layout.scales, bb == 8 ? fp4tables::Kind::nv : fp4tables::Kind::mx);
        }
    }
    throw Error("unknown codec " + std::to_string(static_cast<int>(c)));
}

namespace {

// The contest between a plane's candidate payloads: in order of decode
// speed, a candidate replaces the best so far only when it is smaller by
// more than its margin of the plane. The adaptive coder takes part with a
// floor (the order-0 bound): it is only worth its decode time where the
// best so far is further than its margin above the bound.
//
// The contest starts from the fastest decoders, whose sizes need no coding:
// the plane as it is (raw), or its bit packing where that is smaller
// (`start`, the size the first candidate must beat). Bit packing is coded
// only if no candidate beats it.
struct Contender {
    Codec codec;
    double margin;
    double floor = 0;
    std::vector<uint8_t> payload;
    double entry_size() const { return std::max(static_cast<double>(payload.size()), floor); }
};

// Index of the winner among `c` (their order is the contest's); -1: the start.
int contest_winner(std::span<const Contender> c, size_t n, double start) {
    int best = -1;
    double best_size = start;
    for (size_t k = 0; k < c.size(); ++k)
        if (c[k].entry_size() < best_size - c[k].margin * static_cast<double>(n)) {
            best = static_cast<int>(k);
            best_size = static_cast<double>(c[k].payload.size());
        }
    return best;
}

// The winner's payload size (`start` where no candidate won).
double winner_size(std::span<const Contender> c, size_t n, double start) {
    const int w = contest_winner(c, n, start);
    return w < 0 ? start : static_cast<double>(c[static_cast<size_t>(w)].payload.size());
}

// Whether a contender that would enter the contest at position `at`, whose
// payload is at least `floor` bytes, cannot change its outcome: either it
// could not beat the best before it, or a later winner beats it and
// everything before that winner by the winner's margin, whatever its size.
bool cannot_change_outcome(std::span<const Contender> c, size_t at, double margin, double floor, size_t n,
                           double start) {
    const double nd = static_cast<double>(n);
    const double before = winner_size(c.first(at), n, start);
    if (floor >= before - margin * nd) return true;
    const int final_w = contest_winner(c, n, start);
    if (final_w < static_cast<int>(at)) return false;
    const Contender& win = c[static_cast<size_t>(final_w)];
    double rivals = std::min(start, floor);
    for (int k = 0; k < final_w; ++k) rivals = std::min(rivals, static_cast<double>(c[static_cast<size_t>(k)].payload.size()));
    return win.entry_size() < rivals - win.margin * nd;
}

// A lower bound on the order-1 rANS payload of `plane`, from what any
// htscodecs order-1 stream must hold: the flag byte, four 32-bit final
// states (each carries at most 16 bits beyond its initial value), the
// order-1 entropy of the bytes (less what the three interleaved streams'
// starts, coded in context 0, can save) and a frequency table with at
// least one byte per distinct (previous, byte) pair -- where the table
// stays uncompressed: htscodecs compresses only tables over 1000 bytes,
// which tables of at most 16 symbols never are, and larger alphabets are
// checked against an upper bound on the table (rans1_table_bound).
// The order-1 encoder costs some 20 us a call whatever the plane's size
// (a 256 KiB table cleared, 1 MiB of symbols set up), more than all the
// other candidates on the small planes it is tried on, where it almost
// never wins: the bound lets the contest skip it. (Up to 16 symbols only,
// it let the order-1 encoder run on every E4M3 scale tensor of the NVFP4
// files -- 17-47 symbols, never a win, 9 ms of esrgan NVFP4's pack.)
constexpr unsigned kRans1FloorSymbols = 64;
// What rans1_floor gives for more symbols than that: no bound but the
// stream's fixed bytes.
constexpr double kRans1NoFloor = 17;
constexpr size_t kRans1PlainTableMax = 1000;

// At most how many bytes htscodecs' uncompressed order-1 table takes: a
// flag byte, the alphabet (symbol 0 always in it; at most two bytes a
// symbol and an end byte), then per context (those that precede a byte,
// and 0, which also codes the interleaved streams' starts) one entry per
// alphabet symbol: a frequency of at most 4096 (two varint bytes) or a
// run of zeros (two bytes a run, and a run between two frequencies).
// `successors`: per symbol, how many distinct bytes follow it, context 0's
// starts included; `zero_starts`: those of context 0 where the plane has
// no zero byte.
size_t rans1_table_bound(std::span<const unsigned> successors, unsigned zero_starts) {
    const size_t alphabet = successors.size() + (zero_starts ? 1 : 0);
    size_t bytes = 1 + 2 * alphabet + 1;
    for (unsigned nz : successors) bytes += std::min(2 * alphabet, size_t{4} * nz + 2);
    if (zero_starts) bytes += std::min(2 * alphabet, size_t{4} * zero_starts + 2);
    return bytes;
}

// The runs of zero frequencies in htscodecs' order-1 table: per context
// (a byte that precedes another; 0 left out, whose counts the streams'
// starts change), its frequencies of the alphabet's symbols in byte order,
// each run of absent successors written as two bytes. (On the corpus's
// MXFP4 scale tensors, mostly 3-10 symbols, a byte a pair alone left the
// order-1 encoder running on 56 tensors of the three files, where it
// never won; with the runs, on 16. Without any order-1 attempt the three
// files packed 5-10% faster.)
unsigned rans1_zero_runs(std::span<const uint8_t> plane, const std::array<uint8_t, 256>& index,
                         const std::array<uint32_t, kRans1FloorSymbols * kRans1FloorSymbols>& pair, unsigned symbols) {
    // The alphabet: the bytes that precede another (a subset of
    // htscodecs' contexts, so at most its runs) and 0, in byte order.
    std::array<bool, 256> is_context{};
    for (size_t i = 0; i + 1 < plane.size(); ++i) is_context[plane[i]] = true;
    std::array<uint8_t, kRans1FloorSymbols + 1> alphabet;
    unsigned size = 0;
    for (unsigned v = 0; v < 256; ++v)
        if (v == 0 || is_context[v]) alphabet[size++] = static_cast<uint8_t>(v);
    unsigned runs = 0;
    for (unsigned v = 1; v < 256; ++v) {
        if (!is_context[v]) continue;
        const uint32_t* row = pair.data() + index[v] * kRans1FloorSymbols;
        bool in_run = false;
        for (unsigned k = 0; k < size; ++k) {
            const uint8_t s = alphabet[k];
            const bool zero = index[s] == 0xFF || index[s] >= symbols || row[index[s]] == 0;
            runs += zero && !in_run;
            in_run = zero;
        }
    }
    return runs;
}

uint64_t element_count(const TensorLayout& layout) {
    uint64_t elements = 1;
    for (uint64_t d : layout.shape) elements *= d;
    return elements;
}

// Whether `plane` is a whole tensor of a scale dtype: E8M0 or U8 (block
// scales of any layout, paired or not), or E4M3 that the writer marked as
// an FP4 tensor's scales (in FP8 checkpoints E4M3 tensors are weights).
bool is_scale_tensor(const TensorLayout* whole, size_t n) {
    if (!whole || !whole->dtype || whole->offset != 0 || element_count(*whole) != n) return false;
    const DType t = *whole->dtype;
    return t == DType::U8 || t == DType::F8_E8M0 || (t == DType::F8_E4M3 && whole->block_scales);
}

// Whether `k` decodes slower than order-1 / order-2 rANS (1-1.4 GB/s): the
// adaptive coder and the context models (20-60 MB/s), and f8-tables in its
// four-state layouts (300-600 MB/s; its SIMD layouts are as fast as rANS).
bool decodes_slower_than_rans1(const Contender& k) {
    switch (k.codec) {
        case Codec::adaptive:
        case Codec::scale_model:
        case Codec::scale_mix:
        case Codec::f8_model:
        case Codec::fp4_model: return true;
        case Codec::f8_tables: return !f8tables::simd_layout(k.payload);
        default: return false;
    }
}

// The contest's winner, where order-1 (or order-2) rANS, entered at
// `rans1_at`, takes the win from a slower winner after it that is no
// smaller. The contest holds each coder to its margin over the best before
// it, and order 1's over order 0 is wide: on scale tensors it lost to
// order 0 by that margin, and then f8-tables or the scale model, slower
// but with smaller margins, beat order 0 with payloads larger than order
// 1's (movenet MXFP4's five scale tensors of 5-29 KiB: 13-103 bytes each).
int winner_with_rans1(std::span<const Contender> c, size_t rans1_at, size_t n, double start) {
    const int w = contest_winner(c, n, start);
    if (w < 0 || static_cast<size_t>(w) <= rans1_at || rans1_at >= c.size()) return w;
    const Contender& r = c[rans1_at];
    if ((r.codec == Codec::rans1 || r.codec == Codec::rans2) && decodes_slower_than_rans1(c[static_cast<size_t>(w)]) &&
        r.payload.size() <= c[static_cast<size_t>(w)].payload.size())
        return static_cast<int>(rans1_at);
    return w;
}

double rans1_floor(std::span<const uint8_t> plane) {
    const size_t n = plane.size();
    std::array<uint8_t, 256> index;
    index.fill(0xFF);
    unsigned symbols = 0;
    for (uint8_t b : plane)
        if (index[b] == 0xFF) {
            if (symbols == kRans1FloorSymbols) return kRans1NoFloor;
            index[b] = static_cast<uint8_t>(symbols++);
        }
    thread_local std::array<uint32_t, kRans1FloorSymbols * kRans1FloorSymbols> pair;
    for (unsigned a = 0; a < symbols; ++a) std::fill_n(pair.begin() + a * kRans1FloorSymbols, symbols, 0u);
    for (size_t i = 1; i < n; ++i) ++pair[index[plane[i - 1]] * kRans1FloorSymbols + index[plane[i]]];
    double bits = 0;
    unsigned pairs = 0;
    std::array<unsigned, kRans1FloorSymbols> successors{};
    for (unsigned a = 0; a < symbols; ++a) {
        uint32_t total = 0;
        for (unsigned b = 0; b < symbols; ++b) {
            const uint32_t c = pair[a * kRans1FloorSymbols + b];
            if (c) bits -= srans::k_log2_k(c), ++pairs, total += c, ++successors[a];
        }
        bits += srans::k_log2_k(total);
    }
    bits -= 3 * (std::log2(static_cast<double>(n)) + 1.45);
    // Context 0 codes the other streams' starts too: up to one more successor each.
    const unsigned starts = rans::states(n) - 1;
    const unsigned zero_runs = rans1_zero_runs(plane, index, pair, symbols);
    if (index[0] != 0xFF) successors[index[0]] += starts;
    const bool plain = symbols <= 16 || rans1_table_bound(std::span(successors).first(symbols),
                                                          index[0] != 0xFF ? 0 : starts) <= kRans1PlainTableMax;
    // The table's flag and alphabet end bytes, a byte a pair and two a run
    // of zeros -- less three bytes for each pair the streams' starts may
    // take out of the counts (a frequency between two runs merges them).
    const double with_runs = 2.0 + pairs + 2.0 * zero_runs - 3.0 * starts;
    const double table = plain ? std::max({0.0, pairs > 3 ? pairs - 3.0 : 0.0, with_runs}) : 0;
    return 1 + 16 + table + std::max(0.0, bits - 64) / 8;
}

}  // namespace

EncodedPlane encode_plane(std::span<const uint8_t> plane, const EncodeOptions& opt, const TensorLayout* whole) {
    const size_t n = plane.size();
    if (n == 0) return {Codec::raw, {}};
    if (all_equal(plane)) return {Codec::constant, {plane[0]}};
    const double nd = static_cast<double>(n);

    std::vector<Contender> c;
    c.reserve(7);
    // FP8 weights: the static context tables land at or below the order-0
    // bound. An order-0 rANS stream cannot go below it, and htscodecs'
    // spends on top at least a byte per present symbol on its table, one
    // flag byte, and two bytes per state (a final state holds at most 16
    // bits beyond its initial value): when the tables beat that by the
    // margin rANS would need, it is not tried.
    Histogram hist{};
    // The zstd sample's own bound comes from the first bytes' counts, taken
    // on the way to the whole plane's.
    std::optional<double> head_bound;
    std::vector<uint8_t> f8;
    // (E5M2 bytes [S EEEEE MM] too: the tables code any byte, and the
    // column ranking by bits 3-6 -- the top four exponent bits there --
    // still sorts columns by scale.)
    if (whole && (whole->dtype == DType::F8_E4M3 || whole->dtype == DType::F8_E5M2) && opt.level >= 2) {
        f8 = f8tables::encode(plane, *whole, &hist);
    } else {
        add_to_histogram(plane.first(std::min(n, kZstdSample)), hist);
        if (n > kZstdSample) head_bound = order0_bits(hist) / 8;
        add_to_histogram(plane.subspan(std::min(n, kZstdSample)), hist);
    }
    const double bound_bytes = order0_bits(hist) / 8;
    const size_t packed = bit_pack::encoded_size(hist, n);
    const double start = packed && packed < n ? static_cast<double>(packed) : nd;
    const auto present = static_cast<double>(std::count_if(hist.begin(), hist.end(), [](uint64_t k) { return k != 0; }));
    const double rans_overhead = present + 1 + 2.0 * rans::states(n);
    const double f8_margin = f8tables::simd_layout(f8) ? 0.0 : kF8TablesMargin;
    const bool f8_beats_rans =
        !f8.empty() && static_cast<double>(f8.size()) < bound_bytes + rans_overhead - f8_margin * nd;
    // Nor where that lower bound on its payload cannot beat the plane as it
    // is (small planes whose table costs more than it saves: the biases and
    // per-channel scales of FP8 checkpoints, 32-128 bytes a plane).
    if (!f8_beats_rans && bound_bytes + rans_overhead < start - kTieMargin * nd)
        c.push_back({Codec::rans0, kTieMargin, 0, rans_encode(Codec::rans0, plane)});

    if (opt.level >= 2 && (opt.zstd || opt.level >= 6)) {
        const int zlevel = zstd_level_for(opt.level);
        bool worth_full = opt.level >= 6 || n <= kZstdTiny;
        if (!worth_full) {
            const auto sample = plane.first(std::min(n, kZstdSample));
            const double sample_bound = sample.size() == n ? bound_bytes : head_bound ? *head_bound : order0_bits(sample) / 8;
            worth_full = static_cast<double>(zstd_encode(sample, 1).size()) < kZstdSampleWin * sample_bound;
        }
        if (worth_full) c.push_back({Codec::zstd, kTieMargin, 0, zstd_encode(plane, zlevel)});
    }
    // Order-1 context pays on correlated low-entropy streams such as block
    // scales; it decodes slower, so it is tried only where it may win big.
    // It is encoded last, and only if its lower bound says it may change the
    // outcome (see rans1_floor).
    const size_t rans1_at = c.size();
    const bool large_scales = whole && whole->block_scales && element_count(*whole) > kScaleModelTensorMax;
    const bool rans1_elsewhere = opt.level >= 3 && (bound_bytes < nd / 2 || large_scales) &&
                                 (opt.level >= 7 || (n >= kRans1Min && (n <= kAdaptiveMax || large_scales)));
    const bool scale_tensor = is_scale_tensor(whole, n);
    const bool rans1_for_scales = !rans1_elsewhere && scale_tensor && opt.level >= 3 && n >= kRans1Min;
    const bool try_rans1 = rans1_elsewhere || rans1_for_scales;
    if (!f8.empty()) c.push_back({Codec::f8_tables, f8_margin, 0, std::move(f8)});
    // An order-0 adaptive coder lands near the bound plus a small learning
    // cost; it can only win by its margin where the best so far is further
    // than that above the bound (a static table too large for the plane).
    // (Order 1 can only lower the best so far: without it is the widest test.)
    if (opt.level >= 2 && n <= (opt.level >= kContextModelLevel ? kAdaptiveMax : kAdaptiveFastMax)) {
        const double best_size = winner_size(c, n, start);
        const double margin = opt.level >= kContextModelLevel ? kAdaptiveMargin : kAdaptiveFastMargin;
        // Its payload is at least order0_floor: where that cannot beat the
        // best by the margin either, encoding it is wasted.
        if (best_size - bound_bytes > margin * nd && best_size - adaptive::order0_floor(plane) > margin * nd)
            c.push_back({Codec::adaptive, margin, bound_bytes, adaptive::encode_bytes(plane, 0)});
    }
    // The context models, where the plane is a whole tensor's bytes of their dtype.
    if (whole && whole->dtype && n <= kMaxModelledChunkBytes) {
        const DType t = *whole->dtype;
        const uint64_t elements = element_count(*whole);
        // Coded only where its floor (see plan_scales) can still win.
        if ((t == DType::U8 || t == DType::F8_E8M0) && opt.level >= 2 && n <= kScaleModelMax && bound_bytes < nd / 2 &&
            (opt.level >= kContextModelLevel || elements <= kScaleModelTensorMax)) {
            const auto plan = models::plan_scales(plane, *whole);
            if (!cannot_change_outcome(c, c.size(), kTieMargin, plan.floor_bytes, n, start))
                c.push_back({Codec::scale_model, kTieMargin, 0, models::encode_scales(plane, *whole, plan)});
        }
        // FP4 tensors' scale tensors, E8M0 or E4M3 (the writer marks them):
        // scale-mix, whose margin is a share of the best payload so far, not
        // of the plane: these planes code to 12-55% of their size, so
        // kTieMargin of the plane would be 2-8% of the payload, more than
        // scale-mix saves on most tensors (on the corpus's posenet MXFP4 and
        // NVFP4 it kept the scales 0.4% / 0.6% above their order-0 bound).
        const auto is_whole_tensor = [&] { return whole->offset == 0 && elements == n; };
        if (whole->block_scales && (t == DType::U8 || t == DType::F8_E8M0 || t == DType::F8_E4M3) &&
            opt.level >= kContextModelLevel && n <= kScaleMixMax && is_whole_tensor()) {
            const double best_size = winner_size(c, n, start);
            c.push_back({Codec::scale_mix, kScaleMixMargin * best_size / nd, 0, models::encode_scale_mix(plane, *whole)});
        }
        // Any saving is worth its decode time at these levels.
        if (t == DType::F8_E4M3 && opt.level >= kContextModelLevel)
            c.push_back({Codec::f8_model, 0, 0, models::encode_f8(plane, *whole)});
    }
    // Scale tensors (whole low-entropy tensors of a scale dtype): zstd at
    // its top level, when zstd at a middle level is in the contest and comes
    // within 5% of the best. E4M3 only where the writer marked the tensor
    // as an FP4 tensor's scales: in FP8 checkpoints the low-entropy E4M3
    // weights (small kernels) got it too, 3% of posenet F8's pack time, for
    // 43 bytes of the 18 corpus and derived FP8 files (one tensor).
    const auto zc = std::find_if(c.begin(), c.end(), [](const Contender& k) { return k.codec == Codec::zstd; });
    if (scale_tensor && opt.level >= 2 && n <= kScaleZstdMax && bound_bytes < nd / 2 && zc != c.end()) {
        const double best_size = winner_size(c, n, start);
        if (static_cast<double>(zc->payload.size()) < kScaleZstdReach * best_size) {
            auto top = zstd_encode(plane, kScaleZstdLevel);
            if (top.size() < zc->payload.size()) zc->payload = std::move(top);
        }
    }
    // Block scales (E8M0 / U8) under f8-tables' static tables: its sign
    // table is free on bytes below 128, its 4 states cost 16 bytes where
    // htscodecs' 32 cost 128, and its frequencies have 14-15 bits where
    // htscodecs' have 12 -- on scale tensors of a few KiB each of these is a
    // percent. It decodes slower than rANS, which scale tensors (1/16 to
    // 1/32 of their blocks) can afford. (On FP4 group planes the same saved
    // 0.6% of esrgan's MXFP4 and NVFP4 values but doubled their decode time
    // and added half to the pack time: not taken.)
    // On block scales it is an order-0 coder with less overhead than rANS,
    // not a model of them: on the 516 scale tensors of the 10 corpus and
    // derived FP4 files its payload was never below 93.2% of order-0 rANS's
    // (kScaleF8TablesReach leaves room beyond that). Where the scale model
    // already beats that by its margin, f8-tables cannot win and is not
    // coded (37% of those tensors' f8-tables time, which was a tenth of an
    // MXFP4 file's pack time). Other U8 tensors (FP4 blocks kept as a
    // stream) do not get the floor: there its tables went down to 40% of
    // rANS's payload.
    if (whole && whole->dtype && (*whole->dtype == DType::U8 || *whole->dtype == DType::F8_E8M0) &&
        opt.level >= 2 && n <= kScaleModelMax && bound_bytes < nd / 2) {
        const auto r0 = std::find_if(c.begin(), c.end(), [](const Contender& k) { return k.codec == Codec::rans0; });
        const double floor = whole->block_scales && r0 != c.end()
                                 ? kScaleF8TablesReach * static_cast<double>(r0->payload.size())
                                 : 0;
        if (!cannot_change_outcome(c, rans1_at, kF8TablesMargin, floor, n, start))
            c.insert(c.begin() + static_cast<long>(rans1_at),
                     Contender{Codec::f8_tables, kF8TablesMargin, 0, f8tables::encode(plane, *whole)});
    }

    // On a large model's scale chunk order 1 is expected to win, so its
    // floor (a pass over the pairs, some 1.5 ns a byte, most of what the
    // encoder costs) would skip nothing; and where the chunk holds at most
    // 16 values (E8M0 scales: a few binades), order 2 takes its place (see
    // pair_rans.hpp; its table, at most 256 contexts of 16, stays under 1%
    // of a 256 KiB chunk).
    std::optional<std::vector<uint8_t>> pair;
    if (try_rans1 && large_scales) pair = pair_rans::encode(plane);
    if (pair)
        c.insert(c.begin() + static_cast<long>(rans1_at), Contender{Codec::rans2, kTieMargin, 0, std::move(*pair)});
    else if (try_rans1) {
        const auto may_win = [&] {
            if (large_scales) return true;
            const double floor = rans1_floor(plane);
            if (rans1_for_scales && (floor == kRans1NoFloor || floor >= kScaleRans1Reach * winner_size(c, n, start)))
                return false;
            if (!cannot_change_outcome(c, rans1_at, kTieMargin, floor, n, start)) return true;
            const int w = contest_winner(c, n, start);  // (rans1 would take it: see winner_with_rans1)
            return w >= static_cast<int>(rans1_at) && decodes_slower_than_rans1(c[static_cast<size_t>(w)]) &&
                   floor <= static_cast<double>(c[static_cast<size_t>(w)].payload.size());
        };
        if (may_win())
            c.insert(c.begin() + static_cast<long>(rans1_at),
                     Contender{Codec::rans1, kTieMargin, 0, rans_encode(Codec::rans1, plane)});
    }

    const int w = winner_with_rans1(c, rans1_at, n, start);
    if (w < 0 && start < nd) return {Codec::bit_pack, bit_pack::encode(plane)};
    if (w < 0) return {Codec::raw, {plane.begin(), plane.end()}};
    return {c[static_cast<size_t>(w)].codec, std::move(c[static_cast<size_t>(w)].payload)};
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
        case Codec::scale_mix: models::decode_scale_mix(payload, out, layout); return;
        case Codec::rans2: pair_rans::decode(payload, out); return;
        case Codec::f8_model: models::decode_f8(payload, out, layout); return;
        case Codec::fp4_model: models::decode_fp4(payload, out, layout); return;
        case Codec::f8_tables: f8tables::decode(payload, out); return;
        case Codec::fp4_tables: fp4tables::decode(payload, out, layout.scales); return;
        case Codec::bit_pack: bit_pack::decode(payload, out); return;
    }
    throw CorruptData("unknown codec id " + std::to_string(static_cast<int>(c)));
}

}  // namespace ptwm
