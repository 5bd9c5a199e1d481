#include "codecs/f8_tables.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <type_traits>

#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#define PTWM_F8_WIDE_AVX512 1
#endif

#include "base/cpu_features.hpp"
#include "base/scratch.hpp"
#include "base/varint.hpp"
#include "codecs/static_rans.hpp"
#include "codecs/rans_decode_avx2.hpp"
#include "codecs/rans_encode_avx2.hpp"
#include "ptwm/base/error.hpp"

namespace ptwm::f8tables {
namespace {

using srans::Table;

constexpr uint64_t kMaxPeriod = 1u << 20;  // columns with a class of their own
// Column classes cost log2(classes) bits a column in the payload, and rank
// a column by the mean of the bytes a chunk holds of it: in chunks of less
// than two rows they are not ranked, and row classes (over at most two
// partial rows) are not tried either (the 1 x 3024 .. 1 x 15120 kernels of
// the per-channel FP8 files: 7 selections over as many columns as bytes,
// for classes the estimate never took; at four rows it would have dropped
// classes that NVFP4 E4M3 scale tensors of three rows use).
constexpr uint64_t kClassRows = 2;
constexpr unsigned kMaxLog2Classes = 3;
constexpr unsigned kFinePrec = 14, kCoarsePrec = 12;  // the precisions the encoder weighs
constexpr unsigned kFlagClasses = 3, kFlagCodedSigns = 4, kFlagWide = 8, kFlagStateSigns = 16, kFlagSixtyFour = 32,
                   kFlagRowClasses = 64, kFlagPackedStates = 128;
// Flag 128: the rANS stream's final states are packed (srans::States), in
// every layout; the encoder always sets it. Without it (stores written
// before) they take four bytes each.
// The wide layout: 32 states, two vectors of 16 that step together with
// gathered table loads. Its states cost 112 bytes more than four, under
// 0.1% of the payload from 128 KiB (0.05% at the default 256 KiB chunk),
// for a decoder 2-3x faster where AVX-512 is there. Below that the states
// are too dear: from 16 KiB, esrgan's FP8 file (150 tensors of 18-110 KiB)
// grew 0.2%, above its whole-byte bound, and its small chunks decode at the
// speed of their table set-up anyway.
constexpr size_t kWideLanes = 32;
// The state-signs layout (flag 16, on the wide one): each state starts at
// 2^30 + 30 sign bits instead of 2^15, so the decoder's final states give
// back the signs of the chunk's last 960 bytes, which the payload then
// leaves out. 32 states then cost 8 bytes more than the signs they carry
// instead of 112, and every chunk can have the SIMD decoder: corpus FP8
// tensors are 18-110 KiB, below the 128 KiB the plain wide layout needed.
// Its frequencies are at most 2^12, so a slot's symbol, frequency and
// offset fit one 32-bit word: one gather a state. With flag 32 it has 64
// states (four vectors: more chains in flight, 1.2-1.45x the speed) for
// some 14 bytes more (packed final states; 36 with four bytes a state).
constexpr unsigned kStateSignBits = 30;
constexpr uint32_t kStateSignsMaxFreq = 1u << 12;
constexpr size_t kStateSignsMin = 2048;  // below, 4 states are cheaper than 32
// 64 states from 16 KiB. With four-byte final states they took 36 bytes
// more than 32 and started at 64 KiB: from 16 KiB they decoded esrgan's FP8
// files (150 tensors of 18-110 KiB) 17-25% faster but put two of them
// above their whole-byte bound. Packed states (flag 128) saved more than
// that costs: from 16 KiB every FP8 file is 0.02-0.06% smaller than with
// four-byte states at 64 KiB. From 4 KiB, the derived posenet and movenet
// files grew 0.005-0.01% more, for no speed that rose above the noise.
constexpr size_t kSixtyFourMin = 16u << 10;
// The encoder's precisions: up to 12 bits. 13 and 14 (whose slots fit when
// no symbol takes more than 2^12 of them) saved 0.03% on esrgan's F8 file
// and decoded 10-15% slower (tables of 8-16K slots built per chunk, and
// gathered from L2).
constexpr unsigned kStateSignsEncoderPrec = 12;
// And a chunk's slot words (2^prec a class, a word each) at most 2^13,
// 32 KiB, so that the decoder's gathers hit L1 (48 KiB on this Intel Xeon,
// 32 on Zen 4): prec <= 13 - log2(classes). At 8 classes of 12 bits
// (128 KiB) they came from L2; the budget decoded the derived posenet E5M2
// file 15% faster and the movenet E5M2 and posenet FP8 files 8-10%, for
// 0.07% more over the 33 corpus and derived files (at most 0.18%, the
// derived movenet block file). A 64 KiB budget kept a third of the speed.
constexpr unsigned kSlotBudgetLog2 = 13;
// Near ties go to the decoder: of the state-signs choices (class count,
// precision) that code within a margin of the smallest, the encoder takes
// the one with the fewest slot words, then the fewest tables (each table
// is read, normalised and filled per chunk, some 12% of the derived posenet
// E5M2 file's decode, and fewer slots stay nearer in L1). The margin is a
// quarter of what the smallest choice codes below the plane's own order-0
// bound, and at most 0.2% of the plane (kContestMargin, f8-tables' margin in
// the plane contest): where f8-tables is near the bound (esrgan's FP8
// files, whose small tensors are mostly above it) nothing is given back, so
// no file crosses its whole-byte bound. On posenet E5M2: 5% faster (1.04x zstd -d, was 0.96x)
// for 0.18% more; the other 14 FP8 files 0-0.055% more, 0-2% faster. (A
// flat 0.2% margin: esrgan's F8_E4M3 files grew 0.075%, above their bound;
// a 2^12 slot budget everywhere: posenet E5M2 7% faster, but 0.07-0.3%
// more, esrgan's above its bound.)
constexpr double kNearTieShare = 0.25;
template <size_t Lanes>
constexpr size_t kStateSignsTotal = Lanes * kStateSignBits;  // 960 or 1920

// The column period: the last dimension (the one before it when the last is
// 1), as for the FP8 context model. 1 (no classes) when there is none.
uint64_t column_period(std::span<const uint64_t> shape) {
    if (shape.empty()) return 1;
    const uint64_t row = (shape.back() > 1 || shape.size() < 2) ? shape.back() : shape[shape.size() - 2];
    return row >= 2 && row <= kMaxPeriod ? row : 1;
}

// The rows of a chunk of n bytes at phase h of rows of R bytes: its first
// row is row 0, partial rows included (both sides compute it alike).
uint64_t chunk_rows(uint64_t n, uint64_t period, uint64_t phase) { return (phase + n + period - 1) / period; }

// Calls f(i, len, r) for each run of the chunk's bytes i .. i + len - 1 in
// its row r.
template <class F>
void for_each_row(size_t n, uint64_t period, uint64_t phase, F&& f) {
    size_t i = 0, r = 0;
    for (uint64_t j0 = phase; i < n; j0 = 0, ++r) {
        const size_t len = static_cast<size_t>(std::min<uint64_t>(period - j0, n - i));
        f(i, len, r);
        i += len;
    }
}

// The classes of columns 0 .. period - 1, or what stands for them (the
// decoder's table offsets: T), written by `fill` into the span it is given,
// then those of the next `extra` columns again, wrapped: a SIMD
// round of `extra` bytes loads its classes without a wrap test. In memory
// reused per thread, per caller (each `fill` is a type of its own; neither
// the decoders nor the encoder's writer nest).
template <class T = uint8_t, class Fill>
std::span<const T> wrapped_classes(size_t period, size_t extra, Fill&& fill) {
    thread_local Scratch memory;
    const std::span<T> ext(reinterpret_cast<T*>(memory.get((period + extra) * sizeof(T)).data()), period + extra);
    fill(ext.first(period));
    for (size_t k = period; k < ext.size(); ++k) ext[k] = ext[k - period];
    return ext;
}

// class8[key & index_mask] = the key's rank * 8 / keys, for distinct keys
// that come in index order (key[i] & index_mask == i, index_mask = 2^b - 1):
// a stable sort by the bits above the index then sorts them whole, so they
// are sorted by an LSD radix sort of those bits, a byte at a time, skipping
// bytes all keys share. (std::nth_element found the eighths' boundaries by
// comparisons whose branches mispredicted about every other time: 20 us a
// 1152-column chunk, 9% of the per-channel FP8 files' pack time.)
void rank_in_eighths(std::vector<uint64_t>& key, uint64_t index_mask, std::vector<uint8_t>& class8) {
    const size_t n = key.size();
    uint64_t any = 0, all = ~uint64_t{0};
    for (uint64_t k : key) any |= k, all &= k;
    std::vector<uint64_t> sorted(n);
    for (unsigned shift = static_cast<unsigned>(std::popcount(index_mask)); shift < 64; shift += 8) {
        if ((((any ^ all) >> shift) & 0xFF) == 0) continue;
        std::array<uint32_t, 257> at{};  // then: each byte value's next place
        for (uint64_t k : key) ++at[((k >> shift) & 0xFF) + 1];
        for (unsigned b = 1; b <= 256; ++b) at[b] += at[b - 1];
        for (uint64_t k : key) sorted[at[(k >> shift) & 0xFF]++] = k;
        key.swap(sorted);
    }
    // Eighth c holds ranks from ceil(c n / 8) up to the next boundary.
    for (size_t c = 0; c < 8; ++c)
        for (size_t k = (c * n + 7) / 8; k < ((c + 1) * n + 7) / 8; ++k) class8[key[k] & index_mask] = static_cast<uint8_t>(c);
}

// What the encoder's choice is made from: two passes over the chunk.
struct Plan {
    uint64_t period = 1, phase = 0;
    bool rows = false;                                 // classes per row of the chunk, not per column
    uint64_t units = 1;                                // columns (period) or the chunk's rows
    Histogram bytes{};                                 // all the chunk's bytes
    std::vector<uint8_t> class8;                       // per column or row: its rank by mean exponent, in eighths
    std::array<std::array<uint64_t, 128>, 8> magnitude{};  // magnitude counts per eighth
    // The same merged into 1, 2 and 4 classes, class c of 2^L at
    // 2^L - 1 + c (merge_eighths): the estimates and the precision search
    // read them some 40 times a chunk.
    std::array<std::array<uint64_t, 128>, 7> coarser{};
    std::array<uint64_t, 2> sign{};
};

// A plan's magnitude counts merged into its coarser classes, once counted.
void merge_eighths(Plan& p) {
    for (unsigned c = 0; c < 4; ++c)
        for (size_t s = 0; s < 128; ++s) p.coarser[3 + c][s] = p.magnitude[2 * c][s] + p.magnitude[2 * c + 1][s];
    for (unsigned c = 0; c < 2; ++c)
        for (size_t s = 0; s < 128; ++s) p.coarser[1 + c][s] = p.coarser[3 + 2 * c][s] + p.coarser[4 + 2 * c][s];
    for (size_t s = 0; s < 128; ++s) p.coarser[0][s] = p.coarser[1][s] + p.coarser[2][s];
}

// Class c's byte counts k into the plan's magnitude, sign and byte counts.
// (The signs summed apart: added to p.sign byte by byte, each add waited on
// the last one's store, 7% of make_plan's time.)
void add_class_counts(Plan& p, unsigned c, const std::array<uint32_t, 256>& k) {
    uint64_t positive = 0, negative = 0;
    for (unsigned x = 0; x < 128; ++x) {
        p.magnitude[c][x] += uint64_t{k[x]} + k[x + 128];
        p.bytes[x] += k[x], p.bytes[x + 128] += k[x + 128];
        positive += k[x], negative += k[x + 128];
    }
    p.sign[0] += positive, p.sign[1] += negative;
}

// A chunk's bytes counted per class (eighth), 8 x 256 counters, where a
// run of bytes is all of one class (a row under row classes, a chunk
// without columns), in four tables that take every fourth byte: equal
// bytes close together would otherwise each wait for the other's increment
// (1.5x the speed on esrgan's FP8 chunks). In memory reused per thread,
// all zero between uses: add_to clears what it reads (a memset of all 32
// KiB a chunk was a tenth of the time of a 3 KiB chunk's plan).
class ClassCounts {
public:
    ClassCounts() : part_(memory()) {}
    ClassCounts(const ClassCounts&) = delete;
    ClassCounts& operator=(const ClassCounts&) = delete;
    // bytes[k], all of class cls.
    void add(const uint8_t* bytes, unsigned cls, size_t len) {
        uint32_t* const h[4] = {&part_[0][cls << 8], &part_[1][cls << 8], &part_[2][cls << 8], &part_[3][cls << 8]};
        size_t k = 0;
        for (; k + 4 <= len; k += 4)
            for (size_t t = 0; t < 4; ++t) ++h[t][bytes[k + t]];
        for (; k < len; ++k) ++h[0][bytes[k]];
    }
    // Each class's counts into the plan's magnitude, sign and byte counts;
    // classes 0 .. classes - 1 are all that were added to.
    void add_to(Plan& p, unsigned classes) {
        for (unsigned c = 0; c < classes; ++c) {
            std::array<uint32_t, 256> k;
            for (unsigned x = 0; x < 256; ++x) {
                const size_t at = c << 8 | x;
                k[x] = part_[0][at] + part_[1][at] + part_[2][at] + part_[3][at];  // (a chunk is under 4 GiB)
                part_[0][at] = part_[1][at] = part_[2][at] = part_[3][at] = 0;
            }
            add_class_counts(p, c, k);
        }
    }

private:
    using Parts = std::array<std::array<uint32_t, 8 * 256>, 4>;
    // On the heap, made by a thread's first encoder: as a thread_local
    // array its 32 KiB were in every thread's static TLS, set up at each
    // thread's start (the daemon's FUSE and prefetch threads, which never
    // encode, included).
    static Parts& memory() {
        thread_local const auto parts = std::make_unique<Parts>();  // (zeros)
        return *parts;
    }
    Parts& part_;
};

// A chunk's bytes counted per column class, and per row class too where
// rows are ranked, from each byte's counter index: computed a batch ahead
// into a buffer (a loop the compiler vectorises), then one increment a
// byte. With the column and row counts
// apart (two increments a byte, each from a scalar index) make_plan counted
// at 1.0 ns a byte on the per-channel and block FP8 files' 2-D tensors, at
// 0.36 this way.
// - With row classes: one table of (row class, column class, byte)
//   counters, 8 x 8 x 256, whose sums give both counts. One table, not
//   several taking turns: at 64 classes the bytes next to each other
//   mostly go to different counters, and two 64 KiB tables spilled out of
//   L1 (1.4 ns a byte).
// - Column classes alone: four tables of 8 x 256 taking every fourth byte,
//   as ClassCounts (esrgan's kernels, 64 columns: 0.89 -> 0.52 ns a byte).
// All zero between uses, as ClassCounts; add_to reads and clears only the
// bytes from the chunk's smallest to its largest (the NVFP4 files' E4M3
// scale tensors use some 40 byte values: a memset and a read of the whole
// 64 KiB were a tenth of their plan's time).
class ClassPairCounts {
public:
    static constexpr size_t kBatch = 1024;  // indices computed ahead of their increments
    enum Mode : unsigned { columns = 4, column_and_row = 8 };  // the number of 8 x 256 tables
    explicit ClassPairCounts(Mode mode) : tables_(mode), table_(memory()) {}
    ClassPairCounts(const ClassPairCounts&) = delete;
    ClassPairCounts& operator=(const ClassPairCounts&) = delete;
    // (columns) bytes[k] in the column class whose counters start at
    // base[k] (class * 256), len <= kBatch.
    void add(const uint8_t* bytes, const uint16_t* base, size_t len) {
        uint16_t at[kBatch];
        for (size_t k = 0; k < len; ++k) at[k] = static_cast<uint16_t>(base[k] + bytes[k]);
        size_t k = 0;
        for (; k + 4 <= len; k += 4)
            for (unsigned t = 0; t < 4; ++t) ++table_[(t << 11) + at[k + t]];
        for (; k < len; ++k) ++table_[at[k]];
    }
    // (column_and_row) bytes[k] of a row of class row_cls, in the column
    // class whose counters start at base[k].
    void add(const uint8_t* bytes, const uint16_t* base, unsigned row_cls, size_t len) {
        const auto row_base = static_cast<uint16_t>(row_cls << 11);
        uint16_t at[kBatch];
        for (size_t i = 0; i < len; i += kBatch) {
            const size_t m = std::min(kBatch, len - i);
            for (size_t k = 0; k < m; ++k) at[k] = static_cast<uint16_t>(row_base + base[i + k] + bytes[i + k]);
            // Four increments a round: one a round ran at 0.47-0.72 ns a
            // byte on the per-channel FP8 files' tensors, by where the
            // loop fell in the code (its branch and counter took dispatch
            // slots between the increments), four at 0.44 (make_plan
            // 16.1% -> 14.4% of the derived esrgan per-channel file's pack).
            size_t k = 0;
            for (; k + 4 <= m; k += 4) ++table_[at[k]], ++table_[at[k + 1]], ++table_[at[k + 2]], ++table_[at[k + 3]];
            for (; k < m; ++k) ++table_[at[k]];
        }
    }
    // The counts per column class into `cols`, and per row class into
    // `rows` (column_and_row), of the bytes added, which lie in [lo, hi].
    void add_to(Plan& cols, Plan* rows, unsigned lo, unsigned hi) {
        // Table t is row class t's (column_and_row) or a part (columns):
        // the column counts sum them all. (No sum overflows: a chunk is
        // under 4 GiB.)
        std::array<std::array<uint32_t, 256>, 8> col{}, row{};
        for (unsigned t = 0; t < tables_; ++t)
            for (unsigned c = 0; c < 8; ++c) {
                uint32_t* k = &table_[(t * 8 + c) << 8];
                for (unsigned x = lo; x <= hi; ++x) col[c][x] += k[x], row[t][x] += k[x], k[x] = 0;
            }
        for (unsigned c = 0; c < 8; ++c) {
            add_class_counts(cols, c, col[c]);
            if (rows) add_class_counts(*rows, c, row[c]);
        }
    }

private:
    using Table = std::array<uint32_t, 8 * 8 * 256>;
    static Table& memory() {  // (on the heap: see ClassCounts; zeros)
        thread_local const auto table = std::make_unique<Table>();
        return *table;
    }
    unsigned tables_;
    Table& table_;
};

// Columns' or rows' classes (class8) by the mean of their exponents: keys
// are the mean in 2^-24 steps above the unit's number, in index_bits bits
// (the classes travel in the payload, so the ranking's rounding is the
// encoder's business).
void rank_by_mean(std::span<const uint64_t> sum, std::span<const uint64_t> count, unsigned index_bits,
                  std::vector<uint8_t>& class8) {
    const size_t n = sum.size();
    // Where every unit has one count c (whole rows, or columns of whole
    // rows: every chunk of a tensor under 256 KiB) and c <= 2^24, the keys'
    // means rise with the sum, so the order is by sum, then index: a
    // counting sort by sum, one pass, gives each unit its rank k and class
    // 8k / n (eighth c holds ranks ceil(c n / 8) and on, as below). The
    // radix sort's four passes of 2^-24 steps cost 37 us on esrgan NVFP4's
    // 2304-column scale tensors, 7% of its pack time.
    if (n && count.size() == n && count[0] <= (uint64_t{1} << 24) &&
        std::all_of(count.begin(), count.end(), [&](uint64_t c) { return c == count[0]; })) {
        // (Where the sums' range is small next to the units: a row's sum
        // of 15 a byte can be too large to count by.)
        const uint64_t top = *std::max_element(sum.begin(), sum.end());
        if (top <= 4 * n + 4096) {
            thread_local std::vector<uint32_t> at;  // per sum: then its next rank
            at.assign(top + 2, 0);
            for (uint64_t s : sum) ++at[s + 1];
            for (uint64_t v = 1; v <= top + 1; ++v) at[v] += at[v - 1];
            // 8k / n from a table of each rank's eighth (eighth c holds
            // ranks ceil(c n / 8) on): a division a unit was 40% of this
            // function's time on the NVFP4 files' E4M3 scale tensors (3
            // rows of 384-2304 columns).
            thread_local std::vector<uint8_t> eighth;
            eighth.resize(n);
            for (unsigned c = 0; c < 8; ++c) {
                const size_t from = (c * n + 7) / 8, to = ((c + 1) * n + 7) / 8;
                std::memset(eighth.data() + from, static_cast<int>(c), to - from);
            }
            for (size_t j = 0; j < n; ++j) class8[j] = eighth[at[sum[j]]++];
            return;
        }
    }
    std::vector<uint64_t> key(n);
    for (size_t j = 0; j < key.size(); ++j) key[j] = (sum[j] << 24) / std::max<uint64_t>(count[j], 1) << index_bits | j;
    rank_in_eighths(key, (uint64_t{1} << index_bits) - 1, class8);
}

// Column keys hold the column in 20 bits (kMaxPeriod), row keys the row in
// 32 (a chunk is at most 4 GiB); means are under 2^28.
constexpr unsigned kColumnIndexBits = 20, kRowIndexBits = 32;

Plan make_row_plan(std::span<const uint8_t> in, const TensorLayout& layout);

// The plan with column classes. With `rows`, the row plan too (see
// make_row_plan): where the chunk has column classes, from the same two
// passes over it (2-4% of the per-channel and block FP8 files' pack time).
Plan make_plan(std::span<const uint8_t> in, const TensorLayout& layout, Plan* rows = nullptr) {
    Plan p;
    const size_t n = in.size();
    p.period = column_period(layout.shape);
    if (n < kClassRows * p.period) p.period = 1;
    p.phase = layout.offset % p.period;
    p.units = p.period;
    p.class8.assign(p.period, 0);
    if (p.period == 1) {
        {
            ClassCounts counts;
            counts.add(in.data(), 0u, n);
            counts.add_to(p, 1);
        }
        merge_eighths(p);
        if (rows) *rows = make_row_plan(in, layout);  // (its counts take the memory in turn)
        return p;
    }
    std::vector<uint64_t> row_sum, row_len;
    if (rows) {
        *rows = Plan{};
        rows->period = p.period, rows->phase = p.phase, rows->rows = true;
        rows->units = chunk_rows(n, p.period, p.phase);
        rows->class8.assign(rows->units, 0);
        row_sum.assign(rows->units, 0), row_len.assign(rows->units, 0);
    }
    // Sums in 32 bits where a column's can't overflow them (every chunk up
    // to 256 MiB): they vectorise twice as wide as 64-bit ones.
    const auto column_sums = [&]<class Sum>() {
        std::vector<Sum> sum(p.period);
        for_each_row(n, p.period, p.phase, [&](size_t i, size_t len, size_t r) {
            Sum* const s = sum.data() + (r ? 0 : p.phase);
            if (rows) {
                // (32 bits: a row is at most kMaxPeriod bytes of 15 at most.
                // A 64-bit total made the loop's vectors half as wide: a
                // seventh of the per-channel FP8 files' encoder time.)
                uint32_t t = 0;
                for (size_t k = 0; k < len; ++k) {
                    const Sum e = (in[i + k] >> 3) & 15;
                    s[k] += e, t += static_cast<uint32_t>(e);
                }
                row_sum[r] = t, row_len[r] = len;
            } else {
                for (size_t k = 0; k < len; ++k) s[k] += (in[i + k] >> 3) & 15;
            }
        });
        return std::vector<uint64_t>(sum.begin(), sum.end());
    };
    const std::vector<uint64_t> sum = 15 * (n / p.period + 1) <= UINT32_MAX ? column_sums.template operator()<uint32_t>()
                                                                          : column_sums.template operator()<uint64_t>();
    std::vector<uint64_t> count(p.period, n / p.period);
    for (uint64_t r = 0; r < n % p.period; ++r) ++count[(p.phase + r) % p.period];
    rank_by_mean(sum, count, kColumnIndexBits, p.class8);
    uint8_t lo = 255, hi = 0;  // the bytes' range (n > 0 here)
    for (uint8_t b : in) lo = std::min(lo, b), hi = std::max(hi, b);
    if (rows) {
        rank_by_mean(row_sum, row_len, kRowIndexBits, rows->class8);
        std::vector<uint16_t> base(p.period);
        for (uint64_t j = 0; j < p.period; ++j) base[j] = static_cast<uint16_t>(p.class8[j] << 8);
        ClassPairCounts counts(ClassPairCounts::column_and_row);
        for_each_row(n, p.period, p.phase, [&](size_t i, size_t len, size_t r) {
            counts.add(in.data() + i, base.data() + (r ? 0 : p.phase), rows->class8[r], len);
        });
        counts.add_to(p, rows, lo, hi);
    } else {
        // In batches across rows (esrgan's rows are 64 bytes), each batch's
        // column bases read on from its first column, wrapped.
        constexpr size_t batch = ClassPairCounts::kBatch;
        const auto base = wrapped_classes<uint16_t>(p.period, batch, [&](std::span<uint16_t> b) {
            for (uint64_t j = 0; j < p.period; ++j) b[j] = static_cast<uint16_t>(p.class8[j] << 8);
        });
        ClassPairCounts counts(ClassPairCounts::columns);
        for (size_t i = 0; i < n; i += batch)
            counts.add(in.data() + i, base.data() + (p.phase + i) % p.period, std::min(batch, n - i));
        counts.add_to(p, nullptr, lo, hi);
    }
    merge_eighths(p);
    if (rows) merge_eighths(*rows);
    return p;
}

// The same plan with classes per row: in [out, in] weights scaled per output
// channel (a row) or per 128x128 block (DeepSeek-V3's weight_scale_inv), rows
// differ in scale more than columns do: the derived esrgan per-channel FP8
// file's bytes have an ideal order-0 entropy of 0.7796 of their size under 8
// row classes against 0.7900 under 8 column classes, the posenet and movenet
// block files 0.8239 / 0.8181 against 0.8274 / 0.8194; classes from the
// block scales themselves gave 0.8343 / 0.8240 (and no more than the blocks'
// own mean exponents: the scales need not be read).
Plan make_row_plan(std::span<const uint8_t> in, const TensorLayout& layout) {
    Plan p;
    p.period = column_period(layout.shape);
    p.phase = layout.offset % p.period;
    p.rows = true;
    const size_t n = in.size();
    p.units = chunk_rows(n, p.period, p.phase);
    p.class8.assign(p.units, 0);
    std::vector<uint64_t> sum(p.units, 0), count(p.units, 0);
    for_each_row(n, p.period, p.phase, [&](size_t i, size_t len, size_t r) {
        for (size_t k = i; k < i + len; ++k) sum[r] += (in[k] >> 3) & 15;
        count[r] = len;
    });
    rank_by_mean(sum, count, kRowIndexBits, p.class8);
    ClassCounts counts;
    for_each_row(n, p.period, p.phase, [&](size_t i, size_t len, size_t r) { counts.add(in.data() + i, p.class8[r], len); });
    counts.add_to(p, 8);
    merge_eighths(p);
    return p;
}

// The magnitude counts of class c of 2^log2k classes: eighths merged.
const std::array<uint64_t, 128>& merged(const Plan& p, unsigned log2k, unsigned c) {
    return log2k == 3 ? p.magnitude[c] : p.coarser[(1u << log2k) - 1 + c];
}

// The tables of a choice in payload order: the sign's when coded, then one
// per class.
std::vector<Table> tables_for(const Plan& p, const Choice& ch) {
    std::vector<Table> t;
    if (ch.coded_signs) t.push_back(srans::table_for(p.sign, ch.prec));
    for (unsigned c = 0; c < (1u << ch.log2_classes); ++c) t.push_back(srans::table_for(merged(p, ch.log2_classes, c), ch.prec));
    return t;
}

// The magnitudes' payload bits under a choice, from the counts (exact to
// rounding; what all choices share is left out).
// The tables built on the way go to `tables` where given (write takes
// them: building them again was a twentieth of the per-channel FP8 files'
// pack time).
double magnitude_bits(const Plan& p, const Choice& ch, std::vector<Table>* tables = nullptr) {
    double bits = static_cast<double>(ch.log2_classes ? p.units * ch.log2_classes : 0);
    if (tables) tables->clear();
    for (unsigned c = 0; c < (1u << ch.log2_classes); ++c) {
        const auto& counts = merged(p, ch.log2_classes, c);
        Table t = srans::table_for(counts, ch.prec);
        bits += static_cast<double>(srans::table_bits(t)) + srans::cost_bits(counts, t, ch.prec);
        if (tables) tables->push_back(std::move(t));
    }
    return bits;
}

// The same estimated without building tables: the counts' order-0 entropy
// plus what a table's description costs on average (about 6 bits a present
// symbol and a few more).
double estimated_magnitude_bits(const Plan& p, unsigned log2k) {
    double bits = static_cast<double>(log2k ? p.units * log2k : 0);
    for (unsigned c = 0; c < (1u << log2k); ++c) {
        uint64_t n = 0;
        unsigned present = 0;
        double sum = 0;
        for (uint64_t k : merged(p, log2k, c))
            if (k) n += k, ++present, sum += srans::k_log2_k(k);
        bits += n ? srans::k_log2_k(n) - sum + 6.0 * present + 20 : 1;
    }
    return bits;
}

#ifdef PTWM_F8_WIDE_AVX512
cpu::SimdGate g_simd;

bool has_avx512() { return g_simd.avx512(); }
bool has_avx2() { return g_simd.avx2(); }

// The AVX-512 state-signs decoder's gathers, 8 or 16 lanes: 0 for the
// default, 16 (see decode_state_signs_avx512), else what a test forces.
// (The AVX2 decoder's: srans::avx2::gathers_by_loads.)
std::atomic<unsigned> g_gather_lanes{0};

bool whole_vector_gathers() {
    const unsigned forced = g_gather_lanes.load(std::memory_order_relaxed);
    return forced == 0 || forced == 16;
}

#endif

// Raw sign bits: bit i % 8 of byte i / 8 is byte i's sign.
void pack_signs(std::span<const uint8_t> in, uint8_t* signs) {
    size_t i = 0;
#ifdef __SSE2__
    for (; i + 16 <= in.size(); i += 16) {  // the top bit of sixteen bytes at once
        const auto v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in.data() + i));
        const auto bits = static_cast<uint16_t>(_mm_movemask_epi8(v));
        signs[i / 8] = static_cast<uint8_t>(bits);
        signs[i / 8 + 1] = static_cast<uint8_t>(bits >> 8);
    }
#endif
    for (; i < in.size(); ++i) signs[i / 8] |= static_cast<uint8_t>((in[i] >> 7) << (i % 8));
}

#ifdef PTWM_F8_WIDE_AVX512
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// floor(y / f) or one less, for y < 2^31 and 0 < f <= 2^15, without a
// division (a 512-bit vdivpd pair was two thirds of the encoder's round):
// 1/f from the 14-bit estimate and two Newton steps, good to about 2^-52,
// puts y/f within 2^-20 of the true quotient (below 2^31), nearer than a
// quotient that is not an integer comes to one (1/f, at least 2^-15): it
// truncates to the floor unless the quotient is an integer and the product
// fell just below it.
// The caller adds the one it may lack (see encode_rounds_avx512).
__attribute__((target("avx512f,avx512dq"))) inline __m256i quotient_floor_avx512(__m256i y, __m256i f) {
    const __m512d one = _mm512_set1_pd(1.0), fd = _mm512_cvtepu32_pd(f);
    __m512d r = _mm512_rcp14_pd(fd);
    r = _mm512_fmadd_pd(r, _mm512_fnmadd_pd(fd, r, one), r);
    r = _mm512_fmadd_pd(r, _mm512_fnmadd_pd(fd, r, one), r);
    return _mm512_cvttpd_epu32(_mm512_mul_pd(_mm512_cvtepu32_pd(y), r));
}
__attribute__((target("avx512f,avx512dq"))) inline __m512i quotient_floor_avx512(__m512i y, __m512i f) {
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(quotient_floor_avx512(_mm512_castsi512_si256(y), _mm512_castsi512_si256(f))),
        quotient_floor_avx512(_mm512_extracti64x4_epi64(y, 1), _mm512_extracti64x4_epi64(f, 1)), 1);
}

// code_bytes' whole rounds of Lanes bytes (raw signs), back to front from
// round `rounds` - 1, 16 states a vector: the same words as put() byte by
// byte. One gather a vector of the symbol's frequency and start
// (fc: f | cum << 16 per table slot of sym); the quotient x / f, which put()
// takes from a reciprocal, comes exact from quotient_floor_avx512 and one
// correction, so the states and words are put()'s.
// The words of the states that renormalise are stored compressed, in lane
// order, below the cursor. Byte by byte, the encoder's 64 states lived in
// memory and it coded at about 3 ns a byte: a third of the FP8 pack time.
template <bool Classes, size_t Lanes>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) uint8_t* encode_rounds_avx512(
    const uint8_t* bytes, const uint32_t* fc, const uint8_t* cls_ext, uint64_t period, uint64_t phase, unsigned prec,
    size_t rounds, std::array<uint32_t, Lanes>& x, uint8_t* p) {
    constexpr int V = Lanes / 16;
    __m512i xv[V];
    for (int v = 0; v < V; ++v) xv[v] = _mm512_loadu_si512(x.data() + 16 * v);
    const __m128i max_shift = _mm_cvtsi32_si128(static_cast<int>(31 - prec));
    const __m512i total = _mm512_set1_epi32(static_cast<int>(1u << prec));
    const __m512i lo16 = _mm512_set1_epi32(0xFFFF), lo7 = _mm512_set1_epi32(0x7F);
    const __m128i prec_shift = _mm_cvtsi32_si128(static_cast<int>(prec));
    // Round r's first column, stepped back a round at a time (a division a
    // round cost 3-4% of the encoder's time).
    const uint64_t step = Classes ? Lanes % period : 0;
    uint64_t j = Classes && rounds ? (phase + (rounds - 1) * Lanes) % period : 0;
    for (size_t r = rounds; r-- > 0; j = j >= step ? j - step : j + period - step) {
        const size_t i = r * Lanes;
        for (int v = V; v-- > 0;) {
            __m512i idx = _mm512_and_si512(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + i + 16 * v))), lo7);
            if constexpr (Classes) {
                const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cls_ext + j + 16 * v)));
                idx = _mm512_add_epi32(idx, _mm512_slli_epi32(c, 7));
            }
            const __m512i e = _mm512_i32gather_epi32(idx, fc, 4);
            const __m512i f = _mm512_and_si512(e, lo16), cum = _mm512_srli_epi32(e, 16);
            const __mmask16 m = _mm512_cmpge_epu32_mask(xv[v], _mm512_sll_epi32(f, max_shift));
            const unsigned n = static_cast<unsigned>(__builtin_popcount(m));
            p -= 2 * n;
            _mm256_mask_storeu_epi16(p, static_cast<__mmask16>((1u << n) - 1),
                                     _mm512_cvtepi32_epi16(_mm512_maskz_compress_epi32(m, xv[v])));
            const __m512i y = _mm512_mask_srli_epi32(xv[v], m, xv[v], 16);
            const __m512i q = quotient_floor_avx512(y, f);
            // x' = q * 2^prec + (y - q f) + cum, one more q where q came out
            // one short: its remainder (x' - cum - q 2^prec) is then f or more.
            __m512i xn = _mm512_add_epi32(_mm512_add_epi32(y, cum), _mm512_mullo_epi32(q, _mm512_sub_epi32(total, f)));
            const __m512i rem = _mm512_sub_epi32(_mm512_sub_epi32(xn, cum), _mm512_sll_epi32(q, prec_shift));
            xv[v] = _mm512_mask_add_epi32(xn, _mm512_cmpge_epu32_mask(rem, f), xn, _mm512_sub_epi32(total, f));
        }
    }
    for (int v = 0; v < V; ++v) _mm512_storeu_si512(x.data() + 16 * v, xv[v]);
    return p;
}
#pragma GCC diagnostic pop

// encode_rounds_avx512 with AVX2: 8 states a vector, each lane's symbol
// loaded whole (EncodeSymbol, 16 bytes) and coded as put() codes it.
template <bool Classes, size_t Lanes>
__attribute__((target("avx2"))) uint8_t* encode_rounds_avx2(const uint8_t* bytes, const srans::EncodeSymbol* sym,
                                                           const uint8_t* cls_ext, uint64_t period, uint64_t phase,
                                                           size_t rounds, std::array<uint32_t, Lanes>& x, uint8_t* p) {
    constexpr int V = Lanes / 8;
    __m256i xv[V];
    for (int v = 0; v < V; ++v) xv[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.data() + 8 * v));
    const uint64_t step = Classes ? Lanes % period : 0;
    uint64_t j = Classes && rounds ? (phase + (rounds - 1) * Lanes) % period : 0;
    for (size_t r = rounds; r-- > 0; j = j >= step ? j - step : j + period - step) {
        const size_t i = r * Lanes;
        // The round's symbols' byte offsets in sym, 16 lanes a vector:
        // ((1 + class) * 128 + (byte & 127)) * 16, under 2^16.
        alignas(32) uint16_t off[Lanes];
        for (size_t h = 0; h < Lanes; h += 16) {
            const __m256i b = _mm256_and_si256(
                _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + i + h))), _mm256_set1_epi16(127));
            __m256i c = _mm256_set1_epi16(1);
            if constexpr (Classes)
                c = _mm256_add_epi16(c, _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cls_ext + j + h))));
            _mm256_store_si256(reinterpret_cast<__m256i*>(off + h),
                               _mm256_slli_epi16(_mm256_or_si256(b, _mm256_slli_epi16(c, 7)), 4));
        }
        const auto* const base = reinterpret_cast<const uint8_t*>(sym);
        for (int v = V; v-- > 0;) {
            const srans::EncodeSymbol* e[8];
            for (int k = 0; k < 8; ++k) e[k] = reinterpret_cast<const srans::EncodeSymbol*>(base + off[8 * v + k]);
            srans::avx2::put8(xv[v], srans::avx2::load_fields(e), p);
        }
    }
    for (int v = 0; v < V; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(x.data() + 8 * v), xv[v]);
    return p;
}
#endif

// The rANS pass, back to front (the decoder reads front to back), each
// byte's sign after its magnitude when coded. sym: 128 symbols a table,
// table 0 the sign's; cls: each column's table.
// start: the states the coding starts from (kLow, or 2^30 + sign bits).
// fc: the tables' slots for encode_rounds_avx512, empty where it is not
// used; cls then holds period + Lanes classes (wrapped_classes).
template <bool CodedSigns, bool Classes, size_t Lanes = srans::kLanes>
void code_bytes(std::span<const uint8_t> in, const std::vector<srans::EncodeSymbol>& sym, std::span<const uint8_t> cls,
                uint64_t period, uint64_t phase, const std::array<uint32_t, Lanes>& start, std::vector<uint8_t>& out,
                const std::vector<uint32_t>& fc, unsigned prec, srans::States states) {
    const size_t n = in.size();
    // Two more words a state: a start state above 2^16 moves one word out
    // at its first symbol.
    srans::EncodeBuffer buf((CodedSigns ? 2 : 1) * n + 2 * Lanes, Lanes);
    // A local cursor: through a reference, every byte stored could alias it
    // and the compiler would reload it between the four chains.
    uint8_t* p = buf.cursor();
    std::array<uint32_t, Lanes> x = start;
    uint64_t j = n ? (phase + n - 1) % period : 0;  // byte i's column
    // Plain pointers: the words stored through p could alias a vector's
    // own data pointer, which would then be reloaded at every byte.
    const uint8_t* const bytes = in.data();
    const srans::EncodeSymbol* const sy = sym.data();
    const uint8_t* const cl = cls.data();
    auto code = [&](uint32_t& state, size_t i) __attribute__((always_inline)) {
        const uint8_t v = bytes[i];
        if constexpr (CodedSigns) srans::put(state, p, sy[v >> 7]);
        if constexpr (Classes) {
            srans::put(state, p, sy[(1 + cl[j]) * 128 + (v & 127)]);
            j = j ? j - 1 : period - 1;
        } else {
            srans::put(state, p, sy[128 + (v & 127)]);
        }
    };
    size_t i = n;
    while (i % Lanes) --i, code(x[i % Lanes], i);
#ifdef PTWM_F8_WIDE_AVX512
    if constexpr (!CodedSigns && Lanes % 16 == 0) {
        if (!fc.empty()) {
            p = encode_rounds_avx512<Classes, Lanes>(bytes, fc.data() + 128, cl, period, phase, prec, i / Lanes, x, p);
            i = 0;
        } else if (has_avx2()) {
            p = encode_rounds_avx2<Classes, Lanes>(bytes, sy, cl, period, phase, i / Lanes, x, p);
            i = 0;
        }
    }
#endif
    if constexpr (Lanes == 4) {
        for (; i; i -= 4) {  // four bytes a round, one per state: four chains to overlap
            code(x[3], i - 1);
            code(x[2], i - 2);
            code(x[1], i - 3);
            code(x[0], i - 4);
        }
    } else {
        for (; i; i -= Lanes)
            for (size_t lane = Lanes; lane-- > 0;) code(x[lane], i - Lanes + lane);
    }
    buf.cursor() = p;
    buf.finish(x, out, states);
}

// A coded sign that is always the same (block scales, exponents: bytes
// below 128) has all 2^prec slots: coding it leaves the state as it was and
// puts no word, and decoding it never renormalises. So the encoder does not
// code it, and the decoder reads such a stream as one with raw signs, all
// equal (the NVFP4 files' E4M3 block scales are coded so). The sign (0 or
// 1), or -1 where the sign table `st` codes both.
int constant_sign(const Table& st, unsigned prec) {
    if (!st.used || st.freq.size() != 2) return -1;
    return st.freq[0] == 1u << prec ? 0 : st.freq[1] == 1u << prec ? 1 : -1;
}

// `tables`: the choice's, where the caller has them built (tables_for's).
std::vector<uint8_t> write(std::span<const uint8_t> in, const Plan& p, Choice ch, std::vector<Table> tables = {}) {
    if (p.period == 1) ch.log2_classes = 0;
    if (p.rows != ch.row_classes || (ch.row_classes && (!ch.state_signs || !ch.log2_classes)))
        throw Error("f8-tables: row classes only with state signs and classes");
    if (ch.log2_classes > kMaxLog2Classes || ch.prec < srans::kMinPrec || ch.prec > srans::kMaxPrec ||
        (ch.wide && ch.coded_signs) || (ch.state_signs && !ch.wide) || (ch.sixty_four && !ch.state_signs))
        throw Error("f8-tables: no such choice");
    const auto t = tables.empty() ? tables_for(p, ch) : std::move(tables);
    if (ch.state_signs)
        for (const Table& x : t)
            for (uint32_t f : x.freq)
                if (f > kStateSignsMaxFreq) throw Error("f8-tables: a frequency too large for the state-signs layout");
    const unsigned shift = 3 - ch.log2_classes;
    const size_t n = in.size();
    std::vector<uint8_t> out;
    out.reserve(n + n / 8 + 1024);
    out.push_back(static_cast<uint8_t>(ch.log2_classes | (ch.coded_signs ? kFlagCodedSigns : 0u) | (ch.wide ? kFlagWide : 0u) |
                                       (ch.state_signs ? kFlagStateSigns : 0u) | (ch.sixty_four ? kFlagSixtyFour : 0u) |
                                       (ch.row_classes ? kFlagRowClasses : 0u) | (ch.packed_states ? kFlagPackedStates : 0u)));
    out.push_back(static_cast<uint8_t>(ch.prec));
    if (ch.log2_classes) {
        put_varint(out, p.period);
        put_varint(out, p.phase);
    }
    {
        srans::BitWriter w(out);
        if (ch.log2_classes)
            for (uint64_t j = 0; j < p.units; ++j) w.put(p.class8[j] >> shift, ch.log2_classes);
        for (const Table& x : t) srans::write_table(w, x);
        w.flush();
    }
    const size_t state_lanes = ch.sixty_four ? 64 : 32;
    const srans::States states = ch.packed_states ? srans::States::packed : srans::States::words;
    std::array<uint32_t, 64> state_start;
    if (!ch.coded_signs) {
        const size_t at = out.size();
        out.resize(at + (n + 7) / 8, 0);
        pack_signs(in, out.data() + at);
        if (ch.state_signs) {
            // The last `tail` sign bits go into the start states, lane by
            // lane, 30 each; the payload keeps the bits before them (the
            // last byte's unused bits zero).
            const size_t tail = std::min(n, state_lanes * kStateSignBits), kept = n - tail;
            const uint8_t* sg = out.data() + at;
            for (size_t lane = 0; lane < state_lanes; ++lane) {
                uint32_t r = 0;
                for (unsigned b = 0; b < kStateSignBits; ++b) {
                    const size_t k = kept + lane * kStateSignBits + b;
                    if (k < n) r |= uint32_t{(sg[k / 8] >> (k % 8)) & 1u} << b;
                }
                state_start[lane] = 1u << 30 | r;
            }
            out.resize(at + (kept + 7) / 8);
            if (kept % 8) out.back() &= static_cast<uint8_t>((1u << (kept % 8)) - 1);
        }
    }
    // All tables' symbols in one array, 128 a table; table 0 is the sign's
    // (left empty when the signs are raw).
    const unsigned first = ch.coded_signs ? 0 : 1;
    std::vector<srans::EncodeSymbol> sym((t.size() + first) * 128);
    for (size_t q = 0; q < t.size(); ++q) {
        const auto e = srans::encode_symbols(t[q], ch.prec);
        std::copy(e.begin(), e.end(), sym.begin() + static_cast<std::ptrdiff_t>((q + first) * 128));
    }
    // Each column's class, or with row classes each byte's (a period of the
    // whole chunk), and the SIMD rounds' wrap after them: built in place,
    // in per-thread memory (a chunk-sized vector of row classes was zeroed,
    // filled, then copied into it).
    const uint64_t period = p.rows ? std::max<size_t>(n, 1) : p.period, phase = p.rows ? 0 : p.phase;
    const std::span<const uint8_t> cls = wrapped_classes(period, state_lanes, [&](std::span<uint8_t> head) {
        if (!p.rows) {
            for (uint64_t c = 0; c < p.period; ++c) head[c] = static_cast<uint8_t>(p.class8[c] >> shift);
            return;
        }
        head[0] = 0;  // (an empty chunk)
        for_each_row(n, p.period, p.phase,
                     [&](size_t i, size_t len, size_t r) { std::memset(head.data() + i, p.class8[r] >> shift, len); });
    });
    std::array<uint32_t, srans::kLanes> start;
    start.fill(srans::kLow);
    std::array<uint32_t, kWideLanes> wide_start;
    wide_start.fill(srans::kLow);
    // The SIMD encoder's slots (f | cum << 16, table by table); it loads a
    // round's classes from cls without a wrap.
    std::vector<uint32_t> fc;
#ifdef PTWM_F8_WIDE_AVX512
    if (ch.wide && has_avx512()) {
        fc.assign((t.size() + first) * 128, 0);
        for (size_t q = 0; q < t.size(); ++q)
            for (size_t v = 0; v < 128 && t[q].used; ++v)
                fc[(q + first) * 128 + v] = t[q].freq[v] | t[q].cum[v] << 16;
    }
#endif
    if (ch.sixty_four) {
        if (ch.log2_classes) code_bytes<false, true, 64>(in, sym, cls, period, phase, state_start, out, fc, ch.prec, states);
        else code_bytes<false, false, 64>(in, sym, cls, period, phase, state_start, out, fc, ch.prec, states);
    } else if (ch.state_signs) {
        std::array<uint32_t, 32> start32;
        std::copy_n(state_start.begin(), 32, start32.begin());
        if (ch.log2_classes) code_bytes<false, true, 32>(in, sym, cls, period, phase, start32, out, fc, ch.prec, states);
        else code_bytes<false, false, 32>(in, sym, cls, period, phase, start32, out, fc, ch.prec, states);
    } else if (ch.wide) {
        if (ch.log2_classes) code_bytes<false, true, kWideLanes>(in, sym, cls, period, phase, wide_start, out, fc, ch.prec, states);
        else code_bytes<false, false, kWideLanes>(in, sym, cls, period, phase, wide_start, out, fc, ch.prec, states);
    } else {
        // (A sign that never changes is not coded: see constant_sign.)
        const bool sign_moves = ch.coded_signs && constant_sign(t[0], ch.prec) < 0;
        if (ch.log2_classes) {
            if (sign_moves) code_bytes<true, true>(in, sym, cls, period, phase, start, out, {}, 0, states);
            else code_bytes<false, true>(in, sym, cls, period, phase, start, out, {}, 0, states);
        } else {
            if (sign_moves) code_bytes<true, false>(in, sym, cls, period, phase, start, out, {}, 0, states);
            else code_bytes<false, false>(in, sym, cls, period, phase, start, out, {}, 0, states);
        }
    }
    return out;
}

// One byte on state x. Checked: renormalise with bounds checks (near the
// payload's end); else without them or a branch.
template <bool CodedSigns, bool Checked>
[[gnu::always_inline]] inline uint8_t decode_byte(const std::vector<srans::DecodeTable>& t, const srans::DecodeTable& mt,
                                                  std::span<const uint8_t> signs, unsigned prec, uint32_t& x,
                                                  const uint8_t*& p, const uint8_t* end, size_t i) {
    auto get = [&](const srans::DecodeTable& table) {
        if constexpr (Checked) return srans::get(x, p, end, table, prec);
        else return srans::get_unchecked(x, p, table, prec);
    };
    const unsigned v = get(mt);
    unsigned s;
    if constexpr (CodedSigns) s = get(t[0]);
    else s = (signs[i / 8] >> (i % 8)) & 1;
    return static_cast<uint8_t>(s << 7 | v);
}

template <bool CodedSigns>
void decode_bytes(const std::vector<srans::DecodeTable>& t, const std::vector<uint8_t>& cls, std::span<const uint8_t> signs,
                  unsigned prec, uint64_t period, uint64_t phase, srans::DecodeState<>& d, std::span<uint8_t> out) {
    // A round: four bytes, one per state, at most a word per symbol.
    constexpr std::ptrdiff_t kRoundBytes = 4 * (CodedSigns ? 2 : 1) * 2;
    const size_t n = out.size();
    size_t i = 0;
    uint64_t j = phase;
    // Locals, not d's members: a byte stored to `out` may alias those, and
    // the compiler would reload them at every symbol.
    const uint8_t* p = d.p;
    const uint8_t* const end = d.end;
    auto x = d.x;
    auto table = [&]() __attribute__((always_inline))->const srans::DecodeTable& {
        const auto& mt = t[1 + cls[j]];
        j = j + 1 == period ? 0 : j + 1;
        return mt;
    };
    if constexpr (!CodedSigns) {
        // One symbol a state a round, so the four states step first and then
        // renormalise together: each reads its word at an offset known from
        // the states before it (a sum), not through the cursor they moved --
        // the loads go out at once instead of one after another. The words
        // are consumed in the same order as byte by byte.
        const uint32_t mask = (1u << prec) - 1;
        // The classes' tables as plain pointers, and plain pointers to the
        // rest: a byte stored to `out` may alias a vector's own pointer,
        // which would then be reloaded at every symbol.
        std::array<const uint8_t*, 8> symbol{};
        std::array<const uint32_t*, 8> freq{}, cum{};
        for (size_t c = 1; c < t.size(); ++c)
            symbol[c - 1] = t[c].symbol.data(), freq[c - 1] = t[c].freq.data(), cum[c - 1] = t[c].cum.data();
        const uint8_t* const cl = cls.data();
        const uint8_t* const sg = signs.data();
        uint8_t* const o = out.data();
        for (; i + 4 <= n && end - p >= kRoundBytes; i += 4) {
            std::array<uint32_t, 4> v, in;
            for (unsigned lane = 0; lane < 4; ++lane) {
                const unsigned c = cl[j];
                j = j + 1 == period ? 0 : j + 1;
                const uint32_t slot = x[lane] & mask;
                const unsigned sym = symbol[c][slot];
                x[lane] = freq[c][sym] * (x[lane] >> prec) + slot - cum[c][sym];
                v[lane] = sym;
                in[lane] = x[lane] < srans::kLow;
            }
            const std::array<uint32_t, 4> at = {0, 2 * in[0], 2 * (in[0] + in[1]), 2 * (in[0] + in[1] + in[2])};
            for (unsigned lane = 0; lane < 4; ++lane) {
                uint16_t w;
                std::memcpy(&w, p + at[lane], 2);
                x[lane] = x[lane] << (in[lane] << 4) | (w & (0u - in[lane]));
                o[i + lane] = static_cast<uint8_t>(((sg[(i + lane) / 8] >> ((i + lane) % 8)) & 1) << 7 | v[lane]);
            }
            p += at[3] + 2 * in[3];
        }
    } else {
        for (; i + 4 <= n && end - p >= kRoundBytes; i += 4)
            for (unsigned lane = 0; lane < 4; ++lane)
                out[i + lane] = decode_byte<CodedSigns, false>(t, table(), signs, prec, x[lane], p, end, i + lane);
    }
    for (; i < n; ++i) out[i] = decode_byte<CodedSigns, true>(t, table(), signs, prec, x[i % srans::kLanes], p, end, i);
    d.p = p;
    d.x = x;
}

inline uint8_t end_checked_byte(const srans::DecodeTable& mt, std::span<const uint8_t> signs, unsigned prec, uint32_t& x,
                                const uint8_t*& p, const uint8_t* end, size_t i) {
    const unsigned v = srans::get(x, p, end, mt, prec);
    return static_cast<uint8_t>(((signs[i / 8] >> (i % 8)) & 1) << 7 | v);
}

// The wide layout's tables for gathers: per class c and slot, at
// c << prec | slot, the slot's symbol and its step (freq | (slot - cum) << 16).
struct WideTables {
    std::vector<uint32_t> step;
    std::vector<uint8_t> symbol;  // 3 bytes of padding: a 32-bit gather reads past the last
};

WideTables wide_tables(const std::vector<srans::DecodeTable>& t, unsigned prec) {
    WideTables w;
    const size_t classes = t.size() - 1, slots = size_t{1} << prec;
    w.step.assign(classes * slots, 0);
    w.symbol.assign(classes * slots + 3, 0);
    for (size_t c = 0; c < classes; ++c) {
        const auto& d = t[1 + c];
        if (d.symbol.empty()) continue;  // unused: no byte asks for it (decode checks)
        std::memcpy(w.symbol.data() + c * slots, d.symbol.data(), slots);
        // Symbol by symbol: a run of f slots, a loop the compiler vectorises.
        uint32_t* step = w.step.data() + c * slots;
        for (size_t sym = 0; sym < d.freq.size(); ++sym) {
            const uint32_t f = d.freq[sym];
            uint32_t* run = step + d.cum[sym];
            for (uint32_t k = 0; k < f; ++k) run[k] = f | k << 16;
        }
    }
    return w;
}

// Row classes read by the SIMD rounds from the rows themselves, not
// from an offset a byte: each row's table offset (one more at the end, so
// that a round may look one row ahead), the rows' length (at least a
// round's bytes: a round then spans two rows at most) and where the decoder
// is, its row and the bytes left in it. Writing and reading an offset a
// byte (512 KiB of 16-bit ones for a 256 KiB chunk, 1 MiB of 32-bit
// ones) was 8-10% of the per-channel FP8 files' decode with AVX-512; the
// scalar rounds still write them.
struct RowCursor {
    const uint32_t* at = nullptr;
    uint64_t length = 0;
    uint64_t row = 0;
    uint64_t left = 0;  // 1 .. length
    uint32_t offset() const { return at[row]; }
    // On by k bytes, k <= length.
    void step(uint64_t k) {
        if (left > k) left -= k;
        else ++row, left += length - k;
    }
};

#ifdef PTWM_F8_WIDE_AVX512
// GCC 12 warns inside its own avx512fintrin.h (its undefined-vector idiom).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// Whole rounds of 32 bytes while the payload has room for a word per state;
// returns the bytes decoded (a multiple of 32), leaving states, cursor and
// column where the byte-by-byte decoder carries on.
__attribute__((target("avx512f,avx512bw,avx512vl"))) size_t decode_wide_avx512(
    const WideTables& w, const uint8_t* cls_ext, uint64_t period, uint64_t& j, unsigned prec, const uint8_t* signs,
    srans::DecodeState<kWideLanes>& d, uint8_t* out, size_t n) {
    __m512i x0 = _mm512_loadu_si512(d.x.data()), x1 = _mm512_loadu_si512(d.x.data() + 16);
    const __m512i mask = _mm512_set1_epi32(static_cast<int>((1u << prec) - 1));
    const __m512i lo16 = _mm512_set1_epi32(0xFFFF), lo7 = _mm512_set1_epi32(0x7F);
    const __m256i top = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m128i sh = _mm_cvtsi32_si128(static_cast<int>(prec));
    const uint32_t* step = w.step.data();
    const uint8_t* symbol = w.symbol.data();
    const uint8_t* p = d.p;
    const uint8_t* const end = d.end;
    const uint64_t column_step = 32 % period;  // the column a round moves on by
    size_t i = 0;
    for (; i + 32 <= n && end - p >= 64; i += 32) {
        const __m512i c0 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cls_ext + j)));
        const __m512i c1 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cls_ext + j + 16)));
        j += column_step;  // (j + 32) mod period, without a division
        if (j >= period) j -= period;
        const __m512i i0 = _mm512_or_si512(_mm512_sll_epi32(c0, sh), _mm512_and_si512(x0, mask));
        const __m512i i1 = _mm512_or_si512(_mm512_sll_epi32(c1, sh), _mm512_and_si512(x1, mask));
        const __m512i e0 = _mm512_i32gather_epi32(i0, step, 4), e1 = _mm512_i32gather_epi32(i1, step, 4);
        const __m512i y0 = _mm512_i32gather_epi32(i0, symbol, 1), y1 = _mm512_i32gather_epi32(i1, symbol, 1);
        x0 = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_and_si512(e0, lo16), _mm512_srl_epi32(x0, sh)), _mm512_srli_epi32(e0, 16));
        x1 = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_and_si512(e1, lo16), _mm512_srl_epi32(x1, sh)), _mm512_srli_epi32(e1, 16));
        x0 = srans::renormalize16_avx512(x0, p);
        x1 = srans::renormalize16_avx512(x1, p);
        const __m256i bytes = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi32_epi8(_mm512_and_si512(y0, lo7))),
                                                      _mm512_cvtepi32_epi8(_mm512_and_si512(y1, lo7)), 1);
        uint32_t sg;
        std::memcpy(&sg, signs + i / 8, 4);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_mask_blend_epi8(sg, bytes, _mm256_or_si256(bytes, top)));
    }
    _mm512_storeu_si512(d.x.data(), x0);
    _mm512_storeu_si512(d.x.data() + 16, x1);
    d.p = p;
    return i;
}
#pragma GCC diagnostic pop

// 8 table offsets, 16-bit, as 32-bit lanes.
__attribute__((target("avx2"))) inline __m256i load_offsets8(const uint16_t* at) {
    return _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at)));
}

// 8 states stepped by their table words (symbol, frequency and slot - cum,
// see slot_words); their symbols packed into `pair`, as its first vector
// or its second.
__attribute__((target("avx2"), always_inline)) inline void step8(__m256i& x, __m256i e, __m128i prec, __m256i& pair,
                                                                 bool second) {
    const __m256i f = _mm256_and_si256(_mm256_srli_epi32(e, 7), _mm256_set1_epi32(0x1FFF));
    x = _mm256_add_epi32(_mm256_mullo_epi32(f, _mm256_srl_epi32(x, prec)), _mm256_srli_epi32(e, 20));
    const __m256i symbols = _mm256_and_si256(e, _mm256_set1_epi32(0x7F));
    pair = second ? _mm256_packus_epi32(pair, symbols) : symbols;
}

// As decode_state_signs_avx512 with AVX2: 8 states a vector, gathers
// (vpgatherdd, or scalar loads where ByLoads), and renormalisation by a
// shuffle of the next 8 words; row classes from their rows too.
template <bool Classes, bool Rows, bool ByLoads, size_t Lanes, class Offset>
__attribute__((target("avx2"))) size_t decode_state_signs_avx2(const uint32_t* words, const Offset* cls_at,
                                                                uint64_t period, uint64_t& j, RowCursor* rows,
                                                                unsigned prec, const uint8_t* signs,
                                                                srans::DecodeState<Lanes>& d, uint8_t* out, size_t n) {
    static_assert(!Rows || Classes);
    constexpr int V = Lanes / 8;
    RowCursor rc = Rows ? *rows : RowCursor{};  // a local copy: stores to `out` could alias *rows
    __m256i x[V];
    for (int v = 0; v < V; ++v) x[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(d.x.data() + 8 * v));
    const uint32_t slot_mask = (1u << prec) - 1;
    const __m256i mask = _mm256_set1_epi32(static_cast<int>(slot_mask));
    const __m128i sh = _mm_cvtsi32_si128(static_cast<int>(prec));
    // Sign bits to bytes: byte k of a 32-byte group takes bit k % 8 of
    // sign byte k / 8.
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3,
                                            3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const uint8_t* p = d.p;
    const uint8_t* const end = d.end;
    const uint64_t step = Lanes % period;  // the column a round moves on by
    size_t i = 0;
    for (; i + Lanes <= n && end - p >= static_cast<std::ptrdiff_t>(2 * Lanes); i += Lanes) {
        // Each vector's symbols, packed two vectors to one as they come.
        __m256i pairs[V / 2];
        // Unrolled: as a loop (GCC 12 keeps it one, the round being long),
        // the states went through the stack between the gathers and their
        // steps, two stores and a load a vector a round. Unrolled, the
        // derived E5M2 files decoded 6-7% faster (in-memory, one thread,
        // Zen 3). By loads, each vector steps right after its gather and
        // leaves its symbols packed, so that its gathered words die there
        // (kept for the steps and the bytes after all gathers, they were
        // spilled, and the round took some 6% longer on Zen 4), and the
        // renormalisations come after all the steps. (Each vector
        // renormalised right after its own gather and step as well was 10%
        // slower on Zen 3.) vpgatherdd's latency wants all the gathers out
        // first, then each vector steps and renormalises: stepped right
        // after their gathers, its rounds took 15-20% longer on Zen 4.
        __m256i e[V];
#pragma GCC unroll 8
        for (int v = 0; v < V; ++v) {
            if constexpr (Rows) {
                // Lane k takes the row's table while 8 v + k is below the
                // bytes left in it, else the next row's (a round spans two
                // rows at most, and seldom two).
                if (rc.left >= 8u * (v + 1)) [[likely]] {
                    e[v] = srans::avx2::gather8_slots<ByLoads>(words + rc.offset(), x[v], slot_mask);
                } else {
                    const __m256i ahead = _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int>(rc.left) - 8 * v),
                                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
                    const __m256i c = _mm256_blendv_epi8(_mm256_set1_epi32(static_cast<int>(rc.at[rc.row + 1])),
                                                         _mm256_set1_epi32(static_cast<int>(rc.offset())),
                                                         _mm256_cmpgt_epi32(ahead, _mm256_setzero_si256()));
                    e[v] = srans::avx2::gather8<ByLoads>(words, _mm256_or_si256(c, _mm256_and_si256(x[v], mask)));
                }
            } else if constexpr (!Classes) {
                e[v] = srans::avx2::gather8_slots<ByLoads>(words, x[v], slot_mask);
            } else if constexpr (std::is_same_v<Offset, uint32_t>) {
                // Column classes' offsets go to the integer side with the
                // slots, two lanes a load (a lane a load was 1.5-4% slower
                // than the vector's or: loads are dear too).
                e[v] = srans::avx2::gather8_slots<ByLoads>(words, x[v], slot_mask, cls_at + j + 8 * v);
            } else {  // row classes in rows shorter than a round: an offset a byte
                e[v] = srans::avx2::gather8<ByLoads>(words,
                                                  _mm256_or_si256(load_offsets8(cls_at + j + 8 * v), _mm256_and_si256(x[v], mask)));
            }
            if constexpr (ByLoads) step8(x[v], e[v], sh, pairs[v / 2], v % 2);
        }

        if constexpr (Rows) {
            rc.step(Lanes);
        } else if constexpr (Classes) {
            j += step;  // (j + Lanes) mod period, without a division
            if (j >= period) j -= period;
        }
        for (int v = 0; v < V; ++v) {
            if constexpr (!ByLoads) step8(x[v], e[v], sh, pairs[v / 2], v % 2);
            x[v] = srans::avx2::renormalize16(x[v], p);
        }
        // Four vectors of symbols to 32 bytes in order, the signs on top.
        for (int v = 0; v < V; v += 4) {
            const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(pairs[v / 2], pairs[v / 2 + 1]), order);
            uint32_t sg;
            std::memcpy(&sg, signs + (i + 8 * v) / 8, 4);
            const __m256i sb = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(sg)), spread);
            const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(sb, bit), bit);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 8 * v),
                                _mm256_or_si256(bytes, _mm256_and_si256(set, _mm256_set1_epi8(static_cast<char>(0x80)))));
        }
    }
    for (int v = 0; v < V; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(d.x.data() + 8 * v), x[v]);
    d.p = p;
    if constexpr (Rows) *rows = rc;
    return i;
}
#endif

// The wide layout (raw signs): byte i on state i mod 32.
void decode_wide(const std::vector<srans::DecodeTable>& t, const std::vector<uint8_t>& cls, std::span<const uint8_t> signs,
                 unsigned prec, uint64_t period, uint64_t phase, srans::DecodeState<kWideLanes>& d, std::span<uint8_t> out) {
    const size_t n = out.size();
    size_t i = 0;
    uint64_t j = phase;
#ifdef PTWM_F8_WIDE_AVX512
    if (n >= 64 && has_avx512()) {
        const WideTables w = wide_tables(t, prec);
        const auto cls_ext = wrapped_classes(period, 32, [&](std::span<uint8_t> first) { std::copy_n(cls.begin(), period, first.begin()); });
        i = decode_wide_avx512(w, cls_ext.data(), period, j, prec, signs.data(), d, out.data(), n);
    }
#endif
    const uint8_t* p = d.p;
    for (; i < n; ++i) {
        const auto& mt = t[1 + cls[j]];
        j = j + 1 == period ? 0 : j + 1;
        out[i] = end_checked_byte(mt, signs, prec, d.x[i % kWideLanes], p, d.end, i);
    }
    d.p = p;
}

// The state-signs layout's tables: per class c and slot, at c << prec |
// slot, one word: symbol (bits 0-6), frequency (7-19), slot - cum (20-31).
// (The frequency as it is, not less one: the SIMD step saves an add.)
// A symbol's run of slots is written 16 words at a time, the last group
// running on into the next run, which is written after it (runs and
// classes in slot order): whole vectors, no tail loop. (Filled run by run
// with a tail, the tables were 6% of posenet FP8's decode time.)
constexpr uint32_t kSlotGroup = 16;

// One class's slots from its frequencies; w has kSlotGroup words of slack.
[[gnu::always_inline]] inline void fill_slots_body(uint32_t* w, const uint32_t* freq, const uint32_t* cum, size_t alphabet) {
    for (size_t sym = 0; sym < alphabet; ++sym) {
        const uint32_t f = freq[sym], head = static_cast<uint32_t>(sym) | f << 7;
        uint32_t* run = w + cum[sym];
        for (uint32_t k = 0; k < f; k += kSlotGroup)
            for (uint32_t g = 0; g < kSlotGroup; ++g) run[k + g] = head | (k + g) << 20;
    }
}

#ifdef PTWM_F8_WIDE_AVX512
// The same compiled for AVX-512, where a group is one store. (Dispatched
// by hand: a target_clones resolver runs before ThreadSanitizer's runtime
// is up and crashed every program of the TSan build.)
__attribute__((target("avx512f"))) void fill_slots_avx512(uint32_t* w, const uint32_t* freq, const uint32_t* cum,
                                                         size_t alphabet) {
    fill_slots_body(w, freq, cum, alphabet);
}

// The same with AVX2, by hand (srans::avx2::fill_run).
__attribute__((target("avx2"))) void fill_slots_avx2(uint32_t* w, const uint32_t* freq, const uint32_t* cum,
                                                     size_t alphabet) {
    static_assert(kSlotGroup >= 8);  // fill_run's slack
    for (size_t sym = 0; sym < alphabet; ++sym)
        srans::avx2::fill_run<20>(w + cum[sym], freq[sym], static_cast<uint32_t>(sym) | freq[sym] << 7);
}
#endif

void fill_slots(uint32_t* w, const uint32_t* freq, const uint32_t* cum, size_t alphabet) {
#ifdef PTWM_F8_WIDE_AVX512
    if (has_avx512()) return fill_slots_avx512(w, freq, cum, alphabet);
    if (has_avx2()) return fill_slots_avx2(w, freq, cum, alphabet);
#endif
    fill_slots_body(w, freq, cum, alphabet);
}

const uint32_t* slot_words(const std::vector<Table>& t, unsigned prec) {
    // Per thread and reused: a chunk's tables are built anew, never freed.
    thread_local std::vector<uint32_t> words;
    const size_t classes = t.size() - 1, slots = size_t{1} << prec;
    if (words.size() < classes * slots + kSlotGroup) words.resize(classes * slots + kSlotGroup);
    for (size_t c = 0; c < classes; ++c) {
        uint32_t* w = words.data() + c * slots;
        const auto& d = t[1 + c];
        // Unused: no byte asks for it (decode checks); zeros keep a damaged
        // stream's arithmetic defined.
        if (!d.used) std::fill_n(w, slots, 0u);
        else fill_slots(w, d.freq.data(), d.cum.data(), d.freq.size());
    }
    return words.data();
}

#ifdef PTWM_F8_WIDE_AVX512
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// 16 table offsets, 16- or 32-bit, as 32-bit lanes.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512i load_offsets16(const uint16_t* at) {
    return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)));
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512i load_offsets16(const uint32_t* at) {
    return _mm512_loadu_si512(at);
}

// As decode_wide_avx512 with two or four vectors of 16 states, one gather
// a state: whole rounds of 32 or 64 bytes while the payload has room for a
// word per state. cls_at: each column's table offset, its class << prec
// (32 bits; each byte's, 16 bits where they fit, for row classes in rows
// shorter than a round), so that one ternary op makes a gather index; with
// Rows the offsets come from `rows` instead. The gathers bound the round
// (about 20 cycles for 16 lanes on Zen 4), and little runs beside them:
// every other op adds to its time, and the round is written to have few. Gathers of 16 lanes
// (Gather16), or two of 8 a vector (tests): on an Intel Xeon (Sapphire
// Rapids) one of 16 decoded the derived E5M2 and per-channel files 3-8%
// faster. On Zen 4 two of 8 were 2-8% faster while the column classes'
// offsets were 16-bit and widened by the load; with 32-bit ones, 16 lanes
// decode the column-class and per-tensor FP8 files 3-6.7% faster, and the
// per-channel files (row classes, 16-bit offsets) within 2% either way.
// (A vpmuludq pair in place of vpmulld, whose latency is twice
// theirs on Intel, and one 16-bit expand renormalising two vectors, which
// takes a popcount off the chain between them, were no faster there.)
template <bool Classes, bool Rows, bool Gather16, size_t Lanes, class Offset>
__attribute__((target("avx512f,avx512bw,avx512vl,avx2"))) size_t decode_state_signs_avx512(
    const uint32_t* words, const Offset* cls_at, uint64_t period, uint64_t& j, RowCursor* rows, unsigned prec,
    const uint8_t* signs, srans::DecodeState<Lanes>& d, uint8_t* out, size_t n) {
    static_assert(!Rows || Classes);
    constexpr int V = Lanes / 16;
    RowCursor rc = Rows ? *rows : RowCursor{};  // a local copy: stores to `out` could alias *rows
    __m512i lane[V];  // each vector's byte indices in the round
    for (int v = 0; v < V; ++v)
        lane[v] = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                   _mm512_set1_epi32(16 * v));
    __m512i x[V];
    for (int v = 0; v < V; ++v) x[v] = _mm512_loadu_si512(d.x.data() + 16 * v);
    const __m512i mask = _mm512_set1_epi32(static_cast<int>((1u << prec) - 1));
    const __m512i f13 = _mm512_set1_epi32(0x1FFF);
    const __m128i sh = _mm_cvtsi32_si128(static_cast<int>(prec));
    const uint8_t* p = d.p;
    const uint8_t* const end = d.end;
    const uint64_t step = Lanes % period;  // the column a round moves on by
    size_t i = 0;
    // The last rounds too, not the caller's scalar loop (some three a
    // chunk, 1-2% of a 32-state chunk's decode bit by bit): within the
    // payload's last 2 * Lanes bytes, where a whole vector's load could read
    // past it, the states renormalise by renormalize16_avx512_near_end.
    for (; i + Lanes <= n; i += Lanes) {
        const bool near_end = end - p < static_cast<std::ptrdiff_t>(2 * Lanes);
        __m512i e[V];
        for (int v = 0; v < V; ++v) {
            __m512i idx;
            const uint32_t* base = words;
            if constexpr (Rows) {
                // Vectors whose 16 bytes lie in the row (all but one a
                // round where a row ends, if any) take its table as the
                // gather's base, as the AVX2 rounds do, and their indices
                // are the slots alone; only the vector where the row ends
                // blends two rows' offsets by lane. Each vector blending
                // them (a compare, a blend and a ternary op where an and
                // now does) decoded the per-channel and block files 0-13%
                // slower on Zen 4 (esrgan per-channel 2419 MB/s here,
                // 2194 so; gpt-oss-like block 2918, 2569; one thread, in
                // memory), then behind the AVX2 rounds on five of seven.
                if (rc.left >= 16u * (v + 1)) [[likely]] {
                    base = words + rc.offset();
                    idx = _mm512_and_si512(x[v], mask);
                } else {
                    // Bytes before the row's end take its offset, the rest the next row's.
                    const __m512i left = _mm512_set1_epi32(static_cast<int>(std::min<uint64_t>(rc.left, Lanes)));
                    const __m512i c = _mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(lane[v], left),
                                                              _mm512_set1_epi32(static_cast<int>(rc.at[rc.row + 1])),
                                                              _mm512_set1_epi32(static_cast<int>(rc.offset())));
                    idx = _mm512_ternarylogic_epi32(x[v], mask, c, 0xEA);  // (x & mask) | c
                }
            } else if constexpr (Classes) {
                idx = _mm512_ternarylogic_epi32(x[v], mask, load_offsets16(cls_at + j + 16 * v), 0xEA);  // (x & mask) | c
            } else {
                idx = _mm512_and_si512(x[v], mask);
            }
            if constexpr (Gather16) {
                e[v] = _mm512_i32gather_epi32(idx, base, 4);
            } else {
                const __m256i lo = _mm256_i32gather_epi32(reinterpret_cast<const int*>(base), _mm512_castsi512_si256(idx), 4);
                const __m256i hi = _mm256_i32gather_epi32(reinterpret_cast<const int*>(base), _mm512_extracti64x4_epi64(idx, 1), 4);
                e[v] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            }
        }
        if constexpr (Rows) {
            rc.step(Lanes);
        } else if constexpr (Classes) {
            j += step;  // (j + Lanes) mod period, without a division
            if (j >= period) j -= period;
        }
        for (int v = 0; v < V; ++v) {
            const __m512i f = _mm512_and_si512(_mm512_srli_epi32(e[v], 7), f13);
            x[v] = _mm512_add_epi32(_mm512_mullo_epi32(f, _mm512_srl_epi32(x[v], sh)), _mm512_srli_epi32(e[v], 20));
        }
        for (int v = 0; v < V; ++v)
            x[v] = near_end ? srans::renormalize16_avx512_near_end(x[v], p, end) : srans::renormalize16_avx512(x[v], p);
        // The symbols' low 7 bits, the signs' bits on top: one ternary op a
        // round, (bytes & 0x7F) | (sign ? 0x80 : 0).
        const __m128i b0 = _mm512_cvtepi32_epi8(e[0]), b1 = _mm512_cvtepi32_epi8(e[1]);
        const __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(b0), b1, 1);
        if constexpr (V == 4) {
            const __m128i b2 = _mm512_cvtepi32_epi8(e[2]), b3 = _mm512_cvtepi32_epi8(e[3]);
            const __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(b2), b3, 1);
            const __m512i bytes = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            uint64_t sg;
            std::memcpy(&sg, signs + i / 8, 8);
            const __m512i set = _mm512_movm_epi8(_cvtu64_mask64(sg));
            _mm512_storeu_si512(out + i, _mm512_ternarylogic_epi32(bytes, _mm512_set1_epi8(0x7F), set, 0xE2));
        } else {
            uint32_t sg;
            std::memcpy(&sg, signs + i / 8, 4);
            const __m256i set = _mm256_movm_epi8(_cvtu32_mask32(sg));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                                _mm256_ternarylogic_epi32(lo, _mm256_set1_epi8(0x7F), set, 0xE2));
        }
    }
    for (int v = 0; v < V; ++v) _mm512_storeu_si512(d.x.data() + 16 * v, x[v]);
    d.p = p;
    if constexpr (Rows) *rows = rc;
    return i;
}
#pragma GCC diagnostic pop
#endif

// Bit i of `bits` (8 bits) as bit 7 of byte i, little-endian: each byte
// keeps its own bit of eight copies, and adding 0x7F carries a set one up
// to bit 7 (a byte holds at most 0x80, so nothing carries into the next).
inline uint64_t sign_bytes(uint32_t bits) {
    const uint64_t own = (bits * 0x0101010101010101ull) & 0x8040201008040201ull;
    return (own + 0x7F7F7F7F7F7F7F7Full) & 0x8080808080808080ull;
}

// Without SIMD: whole rounds of Lanes bytes while the payload has room for a
// word per state, eight states at a time: they step, then renormalise in
// lane order, as the SIMD decoder takes their words, and their bytes go out
// in one 8-byte store with their signs (i + g is a multiple of 8: one sign
// byte). Four states at a time, renormalised from offsets known from their
// sums, each byte stored with its own sign bit, the FP8 files decoded at
// 490-540 MB/s on Zen 4 (whole stores in memory), 590-660 so.
template <bool Classes, size_t Lanes, class Offset>
size_t decode_state_signs_rounds(const uint32_t* words, const Offset* cls_at, uint64_t period, uint64_t& j, unsigned prec,
                                 const uint8_t* signs, srans::DecodeState<Lanes>& d, uint8_t* out, size_t n) {
    const uint32_t mask = (1u << prec) - 1;
    auto x = d.x;  // a local copy: stores to `out` could alias d's members
    const uint8_t* p = d.p;
    const uint8_t* const end = d.end;
    const uint64_t step = Lanes % period;  // the column a round moves on by
    size_t i = 0;
    for (; i + Lanes <= n && end - p >= static_cast<std::ptrdiff_t>(2 * Lanes); i += Lanes) {
        for (size_t g = 0; g < Lanes; g += 8) {
            uint64_t bytes = sign_bytes(signs[(i + g) / 8]);
            std::array<uint32_t, 8> in;
            for (unsigned k = 0; k < 8; ++k) {
                uint32_t& s = x[g + k];
                const size_t c = Classes ? cls_at[j + g + k] : 0;
                const uint32_t e = words[c | (s & mask)];
                s = ((e >> 7) & 0x1FFF) * (s >> prec) + (e >> 20);
                bytes |= uint64_t{e & 0x7F} << (8 * k);
                in[k] = s < srans::kLow;
            }
            for (unsigned k = 0; k < 8; ++k) {
                uint16_t w;
                std::memcpy(&w, p, 2);
                x[g + k] = x[g + k] << (in[k] << 4) | (w & (0u - in[k]));
                p += 2 * in[k];
            }
            std::memcpy(out + i + g, &bytes, 8);
        }
        if constexpr (Classes) {
            j += step;  // (j + Lanes) mod period, without a division
            if (j >= period) j -= period;
        }
    }
    d.x = x;
    d.p = p;
    return i;
}

// The state-signs layout: the wide layout's bytes, then the last signs from
// the final states. `kept_signs`: the payload's sign bytes (the signs of the
// bytes before the last min(n, 960)).
// `rows`: row classes by their rows (then cls_at is empty, and the CPU has
// AVX-512 or AVX2).
template <size_t Lanes, class Offset>
void decode_state_signs(const std::vector<Table>& t, std::span<const Offset> cls_at,
                        std::span<const uint8_t> kept_signs, unsigned prec, uint64_t period, uint64_t phase,
                        srans::DecodeState<Lanes>& d, std::span<uint8_t> out, RowCursor* rows = nullptr) {
    const size_t n = out.size();
    const size_t tail = std::min(n, kStateSignsTotal<Lanes>), kept = n - tail;
    // All signs, the tail's zero until the states give them back; 8 bytes
    // of slack for the SIMD loop's 64-bit loads.
    thread_local std::vector<uint8_t> signs;
    if (signs.size() < (n + 7) / 8 + 8) signs.resize((n + 7) / 8 + 8);
    std::memcpy(signs.data(), kept_signs.data(), kept_signs.size());
    std::memset(signs.data() + kept_signs.size(), 0, (n + 7) / 8 + 8 - kept_signs.size());
    if (kept % 8) signs[kept / 8] &= static_cast<uint8_t>((1u << (kept % 8)) - 1);
    const uint32_t* words = slot_words(t, prec);
    const bool classes = t.size() > 2;
    size_t i = 0;
    uint64_t j = phase;
    if (n >= 2 * Lanes) {
        const Offset* const cls_ext = cls_at.data();  // columns j .. j + Lanes - 1 without a wrap
#ifdef PTWM_F8_WIDE_AVX512
        // Where the AVX2 rounds gather by scalar loads (off Intel), they
        // run on AVX-512 CPUs too. On Zen 4 a 16-lane vpgatherdd issues
        // once per 8.1 TSC cycles, 16 scalar loads with their inserts once
        // per 5.0 (a microbenchmark), which pays for the AVX2 rounds'
        // extra extracts and shuffles: they decoded every FP8 file as fast
        // as the AVX-512 rounds or faster, the one-class and column-class
        // files 0.4-3.5% (movenet / posenet E5M2 2553 / 2405 -> 2629 /
        // 2491 MB/s, esrgan E5M2 2738 -> 2773), the row-class ones 0-2%
        // (one thread, in memory, medians of 9 alternated runs). Tests
        // still force the AVX-512 rounds by their gather width.
        if (has_avx512() && !srans::avx2::gathers_by_loads()) {
            const auto rounds = [&]<bool Gather16>() {
                const auto with = [&]<bool Classes, bool Rows>() {
                    return decode_state_signs_avx512<Classes, Rows, Gather16, Lanes, Offset>(
                        words, cls_ext, period, j, rows, prec, signs.data(), d, out.data(), n);
                };
                return rows      ? with.template operator()<true, true>()
                       : classes ? with.template operator()<true, false>()
                                 : with.template operator()<false, false>();
            };
            i = whole_vector_gathers() ? rounds.template operator()<true>() : rounds.template operator()<false>();
        } else if (has_avx2()) {
            const auto rounds = [&]<bool ByLoads>() {
                const auto with = [&]<bool Classes, bool Rows>() {
                    return decode_state_signs_avx2<Classes, Rows, ByLoads, Lanes, Offset>(words, cls_ext, period, j, rows, prec,
                                                                                         signs.data(), d, out.data(), n);
                };
                return rows      ? with.template operator()<true, true>()
                       : classes ? with.template operator()<true, false>()
                                 : with.template operator()<false, false>();
            };
            i = srans::avx2::gathers_by_loads() ? rounds.template operator()<true>() : rounds.template operator()<false>();
        }
#endif
        if (i == 0 && !rows) {
            if (classes)
                i = decode_state_signs_rounds<true, Lanes, Offset>(words, cls_ext, period, j, prec, signs.data(), d, out.data(), n);
            else
                i = decode_state_signs_rounds<false, Lanes, Offset>(words, nullptr, period, j, prec, signs.data(), d, out.data(), n);
        }
        if (!classes) j = (phase + i) % period;
    }
    const uint32_t mask = (1u << prec) - 1;
    const uint8_t* p = d.p;
    const uint8_t* const end = d.end;
    for (; i < n; ++i) {
        const uint32_t* w;
        if (rows) {
            w = words + rows->offset();
            rows->step(1);
        } else {
            w = words + cls_at[j];
            j = j + 1 == period ? 0 : j + 1;
        }
        uint32_t& x = d.x[i % Lanes];
        const uint32_t e = w[x & mask];
        x = ((e >> 7) & 0x1FFF) * (x >> prec) + (e >> 20);
        if (x < srans::kLow) {
            if (end - p < 2) throw CorruptData("f8-tables: stream runs past the payload");
            x = x << 16 | uint32_t{p[0]} | uint32_t{p[1]} << 8;
            p += 2;
        }
        out[i] = static_cast<uint8_t>(((signs[i / 8] >> (i % 8)) & 1) << 7 | (e & 0x7F));
    }
    d.p = p;
    if (d.p != d.end) throw CorruptData("f8-tables: bytes left after the stream");
    // The final states: 2^30 + the tail's signs, 30 a state; bits past the
    // last byte zero.
    for (size_t lane = 0; lane < Lanes; ++lane) {
        const uint32_t x = d.x[lane];
        if (x >> kStateSignBits != 1) throw CorruptData("f8-tables: stream does not end where it started");
        const size_t first = kept + lane * kStateSignBits;
        if (first + kStateSignBits <= n) {
            // A lane whose signs all fall inside the chunk (all but the
            // last, or none): eight at a time, no test a bit (bit by bit
            // this was 2-3% of a 32-state chunk's decode).
            // The last eight from bit 22, overlapping the third eight by two
            // (or-ing their signs again changes nothing): four whole 8-byte
            // loads and stores. A 6-byte tail read into a zeroed word stalled
            // on store forwarding, half of this loop's time.
            static_assert(kStateSignBits == 30);
            uint8_t* o = out.data() + first;
            for (unsigned q : {0u, 8u, 16u, kStateSignBits - 8}) {
                uint64_t v;
                std::memcpy(&v, o + q, 8);
                v |= sign_bytes((x >> q) & 0xFF);
                std::memcpy(o + q, &v, 8);
            }
            continue;
        }
        for (unsigned b = 0; b < kStateSignBits; ++b) {
            const size_t k = kept + lane * kStateSignBits + b;
            const unsigned bit = (x >> b) & 1;
            if (k < n) out[k] = static_cast<uint8_t>(out[k] | bit << 7);
            else if (bit) throw CorruptData("f8-tables: sign bits past the chunk");
        }
    }
}

}  // namespace

void allow_simd([[maybe_unused]] bool allowed) {
#ifdef PTWM_F8_WIDE_AVX512
    g_simd.allow_simd(allowed);
#endif
}

void allow_avx512([[maybe_unused]] bool allowed) {
#ifdef PTWM_F8_WIDE_AVX512
    g_simd.allow_avx512(allowed);
#endif
}

void force_gather_lanes([[maybe_unused]] unsigned lanes) {
#ifdef PTWM_F8_WIDE_AVX512
    g_gather_lanes.store(lanes, std::memory_order_relaxed);
    srans::avx2::g_gather_lanes.store(lanes == 16 ? 8 : lanes, std::memory_order_relaxed);
#endif
}

std::vector<uint8_t> encode_with(std::span<const uint8_t> in, const TensorLayout& layout, const Choice& choice) {
    return write(in, choice.row_classes ? make_row_plan(in, layout) : make_plan(in, layout), choice);
}

std::vector<uint8_t> encode(std::span<const uint8_t> in, const TensorLayout& layout, Histogram* byte_counts) {
    // Row classes are a choice of the state-signs layout, on 2-D weights
    // only: on the corpus's 4-D kernels (TensorFlow [kh, kw, in, out], a
    // "row" one tap of one input channel) they saved 0.013% of movenet's FP8
    // file for a fifth of the encoder's time. Where they may be chosen,
    // their plan comes from make_plan's passes.
    const uint64_t n = in.size();
    const uint64_t period = column_period(layout.shape);
    const bool may_row = layout.shape.size() == 2 && period > 1 && n >= kStateSignsMin && n >= kClassRows * period;
    Plan rows;
    const Plan p = make_plan(in, layout, may_row ? &rows : nullptr);
    if (byte_counts) *byte_counts = p.bytes;
    // The class count by the estimate (exact sizes need the tables built,
    // and building them for every count costs as much as the coding); the
    // precision exactly, for that count.
    Choice best{0, kFinePrec, false, false, false, false, false};
    double best_bits = -1;
    for (unsigned log2k = 0; log2k <= (p.period > 1 ? kMaxLog2Classes : 0); ++log2k) {
        const double bits = estimated_magnitude_bits(p, log2k);
        if (best_bits < 0 || bits < best_bits) best_bits = bits, best.log2_classes = log2k;
    }
    // Signs are raw bits unless coding them saves a twentieth: weights are
    // about as often negative as positive, and a coded sign doubles the
    // decoder's work.
    const Table st = srans::table_for(p.sign, kCoarsePrec);
    best.coded_signs = n && static_cast<double>(srans::table_bits(st)) + srans::cost_bits(p.sign, st, kCoarsePrec) <
                                0.95 * static_cast<double>(n);
    if (!best.coded_signs && n >= kStateSignsMin) {
        // The state-signs layout (SIMD decoding) at the precision that
        // codes smallest of those its one-word slots allow.
        best.wide = best.state_signs = true;
        best.sixty_four = n >= kSixtyFourMin;
        // Classes per row instead, where the estimate says they code smaller.
        if (may_row) {
            for (unsigned log2k = 1; log2k <= kMaxLog2Classes; ++log2k) {
                const double bits = estimated_magnitude_bits(rows, log2k);
                if (bits < best_bits) best_bits = bits, best.log2_classes = log2k, best.row_classes = true;
            }
        }
        // Every class count up to the estimate's, at every precision the
        // slot budget allows (at most 9 choices, 25 tables built), coded
        // exactly: the smallest, then the one the decoder sets up fastest of
        // those within the slack (see kNearTieShare). (Signs are raw here,
        // so the class tables are all the tables.)
        struct Option {
            Choice ch;
            double bits;
            std::vector<Table> tables;
        };
        std::vector<Option> options;
        for (unsigned log2k = 0; log2k <= best.log2_classes; ++log2k)
            for (unsigned prec = std::min(kStateSignsEncoderPrec, kSlotBudgetLog2 - log2k); prec >= srans::kMinPrec; --prec) {
                Option o{best, 0, {}};
                o.ch.log2_classes = log2k, o.ch.prec = prec;
                o.ch.row_classes = best.row_classes && log2k;
                o.bits = magnitude_bits(o.ch.row_classes ? rows : p, o.ch, &o.tables);
                options.push_back(std::move(o));
            }
        double least = options[0].bits;
        for (const Option& o : options) least = std::min(least, o.bits);
        // The plane's order-0 bound less what the payload is at its smallest
        // (every sign counted raw, the tail's too, which the final states
        // carry, and the states left out: about even).
        const double bound = order0_bits(p.bytes);
        const double slack = std::min(kContestMargin * 8.0 * static_cast<double>(n),
                                      kNearTieShare * std::max(0.0, bound - (least + static_cast<double>(n))));
        const auto cost = [](const Choice& ch) { return std::pair{ch.prec + ch.log2_classes, ch.log2_classes}; };
        Option* pick = nullptr;
        for (Option& o : options)
            if (o.bits <= least + slack && (!pick || cost(o.ch) < cost(pick->ch) || (cost(o.ch) == cost(pick->ch) && o.bits < pick->bits)))
                pick = &o;
        best = pick->ch;
        std::vector<Table> tables = std::move(pick->tables);
        const Plan& chosen = best.row_classes ? rows : p;
        return write(in, chosen, best, std::move(tables));  // (at 12 bits or fewer every frequency fits a slot)
    }
    Choice coarse = best;
    coarse.prec = kCoarsePrec;
    if (magnitude_bits(p, coarse) < magnitude_bits(p, best)) best = coarse;
    return write(in, p, best);
}

bool simd_layout(std::span<const uint8_t> payload) { return !payload.empty() && (payload[0] & kFlagWide); }

void decode(std::span<const uint8_t> payload, std::span<uint8_t> out) {
    if (payload.size() < 2) throw CorruptData("f8-tables: truncated header");
    const unsigned flags = payload[0], prec = payload[1];
    const unsigned log2k = flags & kFlagClasses;
    const bool coded_signs = flags & kFlagCodedSigns;
    const bool wide = flags & kFlagWide, state_signs = flags & kFlagStateSigns, sixty_four = flags & kFlagSixtyFour;
    const bool row_classes = flags & kFlagRowClasses;
    const srans::States states = flags & kFlagPackedStates ? srans::States::packed : srans::States::words;
    if (row_classes && (!state_signs || !log2k)) throw CorruptData("f8-tables: row classes without their layout");
    if (wide && coded_signs) throw CorruptData("f8-tables: coded signs in the wide layout");
    if ((state_signs && !wide) || (sixty_four && !state_signs)) throw CorruptData("f8-tables: state signs without their layout");
    if (prec < srans::kMinPrec || prec > srans::kMaxPrec) throw CorruptData("f8-tables: bad table precision");
    payload = payload.subspan(2);
    uint64_t period = 1, phase = 0;
    if (log2k) {
        period = get_varint(payload, "f8-tables");
        phase = get_varint(payload, "f8-tables");
        if (period < 2 || period > kMaxPeriod || phase >= period) throw CorruptData("f8-tables: bad column period");
    }
    const uint64_t chunk_period = period, chunk_phase = phase;  // the rows' (period becomes the chunk's with row classes)
    const size_t n = out.size();
    // Row classes: one per row the chunk touches (at most n / 2 + 2).
    std::vector<uint8_t> cls(row_classes ? chunk_rows(n, period, phase) : period, 0);
    // The sign's (unused when raw), then one per class. Per thread and
    // reused, their vectors too: read anew for every chunk (decode does not
    // nest).
    thread_local std::vector<Table> tables;
    tables.resize(1 + (size_t{1} << log2k));
    {
        srans::BitReader r(payload);
        if (log2k) r.get_each(log2k, cls.size(), cls.data());
        if (coded_signs) srans::read_table(r, 2, prec, tables[0]);
        else tables[0] = Table{};
        for (unsigned c = 0; c < (1u << log2k); ++c) srans::read_table(r, 128, prec, tables[1 + c]);
        payload = payload.subspan(r.bytes_used());
    }
    if (n) {
        // Every table the bytes may ask for must be there.
        std::array<bool, 8> used{};
        if (row_classes)
            for (uint8_t c : cls) used[c] = true;
        else  // the columns the bytes touch: all of them, or phase .. phase + n - 1 with a wrap
            for (uint64_t j = 0, c = phase; j < std::min<uint64_t>(period, n); ++j, c = c + 1 == period ? 0 : c + 1)
                used[cls[c]] = true;
        for (unsigned c = 0; c < (1u << log2k); ++c)
            if (used[c] && !tables[1 + c].used) throw CorruptData("f8-tables: a class without a table");
        if (coded_signs && !tables[0].used) throw CorruptData("f8-tables: no sign table");
    }
    std::span<const uint8_t> signs;
    if (!coded_signs) {
        const size_t tail = state_signs ? std::min<size_t>(n, (sixty_four ? 64 : 32) * kStateSignBits) : 0;
        const size_t in_payload = (n - tail + 7) / 8;
        if (payload.size() < in_payload) throw CorruptData("f8-tables: truncated signs");
        signs = payload.first(in_payload);
        payload = payload.subspan(signs.size());
    }
    if (state_signs) {
        // A table's frequencies sum to 2^prec (read_table checks), so only
        // above 12 bits can one exceed the layout's 2^12. There, the largest
        // and one test (the compiler vectorises the max; a test a frequency
        // was a tenth of this function's own time).
        if ((1u << prec) > kStateSignsMaxFreq) {
            uint32_t largest = 0;
            for (const Table& x : tables)
                for (uint32_t f : x.freq) largest = std::max(largest, f);
            if (largest > kStateSignsMaxFreq) throw CorruptData("f8-tables: a frequency too large for its layout");
        }
        // With row classes every byte gets its row's class: the period is
        // the whole chunk. Built once (a 256 KiB chunk of row classes used
        // to be allocated, zeroed and copied twice).
        if (row_classes) period = std::max<size_t>(n, 1), phase = 0;
        // Row classes with AVX2 or AVX-512 (has_avx2: either), in rows of at
        // least a round's bytes: each row's table offset, and the rounds
        // take them row by row (see RowCursor).
#ifdef PTWM_F8_WIDE_AVX512
        const bool by_rows = row_classes && has_avx2() && chunk_period >= (sixty_four ? 64u : 32u) && !cls.empty();
#else
        const bool by_rows = false;
#endif
        if (by_rows) {
            thread_local Scratch memory;
            const auto at = reinterpret_cast<uint32_t*>(memory.get((cls.size() + 1) * sizeof(uint32_t)).data());
            for (size_t r = 0; r < cls.size(); ++r) at[r] = uint32_t{cls[r]} << prec;
            at[cls.size()] = at[cls.size() - 1];  // the row a chunk's last round may look ahead to
            RowCursor rows{at, chunk_period, 0, chunk_period - chunk_phase};
            if (sixty_four) {
                srans::DecodeState<64> d(payload, states);
                decode_state_signs<64, uint32_t>(tables, {}, signs, prec, n, 0, d, out, &rows);
            } else {
                srans::DecodeState<32> d(payload, states);
                decode_state_signs<32, uint32_t>(tables, {}, signs, prec, n, 0, d, out, &rows);
            }
            return;
        }
        // Otherwise each column's (or byte's) table offset in the slot
        // words. Column classes, one a column (at most a few thousand), take
        // 32 bits, which the SIMD rounds load as they are instead of
        // widening them (3-5% faster on Zen 4 with AVX-512, the same with
        // AVX2). Row classes give every byte its own: 16 bits where they
        // fit (the encoder's tables, up to 2^12 slots) keep them at twice
        // the chunk's size, not four times.
        const auto decode_with = [&]<class Offset>() {
            const auto at = [&](uint8_t c) { return static_cast<Offset>(uint32_t{c} << prec); };
            const auto ext = wrapped_classes<Offset>(period, sixty_four ? 64 : 32, [&](std::span<Offset> first) {
                if (!row_classes) {
                    std::transform(cls.begin(), cls.begin() + static_cast<std::ptrdiff_t>(period), first.begin(), at);
                    return;
                }
                first[0] = 0;  // (an empty chunk)
                for_each_row(n, chunk_period, chunk_phase,
                             [&](size_t i, size_t len, size_t r) { std::fill_n(first.data() + i, len, at(cls[r])); });
            });
            if (sixty_four) {
                srans::DecodeState<64> d(payload, states);
                decode_state_signs(tables, ext, signs, prec, period, phase, d, out);
            } else {
                srans::DecodeState<32> d(payload, states);
                decode_state_signs(tables, ext, signs, prec, period, phase, d, out);
            }
        };
        if (row_classes && (7u << prec) <= UINT16_MAX) decode_with.template operator()<uint16_t>();
        else decode_with.template operator()<uint32_t>();
        return;
    }
    std::vector<srans::DecodeTable> t;
    for (const Table& x : tables) t.push_back(srans::decode_table(x, prec));
    if (wide) {
        srans::DecodeState<kWideLanes> d(payload, states);
        decode_wide(t, cls, signs, prec, period, phase, d, out);
        d.finish();
        return;
    }
    srans::DecodeState<> d(payload, states);
    // A sign that never changes decodes by the faster loop, as raw signs
    // all equal (see constant_sign).
    const int sign = coded_signs ? constant_sign(tables[0], prec) : -1;
    if (sign >= 0) {
        thread_local Scratch memory;
        const std::span<uint8_t> same = memory.get((n + 7) / 8);
        std::memset(same.data(), sign ? 0xFF : 0, same.size());
        decode_bytes<false>(t, cls, same, prec, period, phase, d, out);
    } else if (coded_signs) {
        decode_bytes<true>(t, cls, signs, prec, period, phase, d, out);
    } else {
        decode_bytes<false>(t, cls, signs, prec, period, phase, d, out);
    }
    d.finish();
}

}  // namespace ptwm::f8tables
