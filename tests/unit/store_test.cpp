// Pack -> store -> read back must give the original bytes exactly, for every
// dtype and for any range a reader asks for.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "ptwm/base/error.hpp"
#include "ptwm/store/safetensors.hpp"
#include "ptwm/store/store_decoder.hpp"
#include "ptwm/store/store_reader.hpp"
#include "ptwm/store/store_writer.hpp"
#include "test_files.hpp"

namespace ptwm {
namespace {

using test::TempDir;
using test::TestTensor;

std::vector<TestTensor> every_dtype_tensors() {
    std::mt19937 rng(42);
    auto random_bytes = [&](size_t n) {
        std::vector<uint8_t> v(n);
        for (auto& b : v) b = static_cast<uint8_t>(rng());
        return v;
    };
    const auto w = test::normal_floats(100003, 5);
    std::vector<TestTensor> t = {
        {"w.f32", "F32", {100003}, test::as_f32_bytes(w)},
        {"w.bf16", "BF16", {100003}, test::as_bf16_bytes(w)},
        {"w.f16", "F16", {3, 5}, random_bytes(30)},
        {"w.f8", "F8_E4M3", {70001}, random_bytes(70001)},
        {"w.f8e5", "F8_E5M2", {17}, random_bytes(17)},
        {"w.e8m0", "F8_E8M0", {9}, random_bytes(9)},
        {"w.f4", "F4", {2, 6}, random_bytes(6)},
        {"w.f6", "F6_E3M2", {4, 32}, random_bytes(96)},    // MXFP6: 4 elements a 3 bytes
        {"w.f6e2", "F6_E2M3", {100000}, random_bytes(75000)},  // more than a chunk
        {"empty", "F32", {0, 4}, {}},
        {"scalar", "F64", {}, random_bytes(8)},
        {"ids", "I64", {1000}, std::vector<uint8_t>(8000, 0)},
        {"c", "C64", {5}, random_bytes(40)},
        {"b", "BOOL", {3}, {0, 1, 1}},
        {"u16", "U16", {4}, random_bytes(8)},
        {"i32", "I32", {4}, random_bytes(16)},
    };
    return t;
}

TEST(Store, EveryDtypeRoundTripsByteForByte) {
    TempDir dir;
    const auto original = test::make_safetensors(every_dtype_tensors(), R"({"format":"pt"})");
    test::write_file(dir / "m.safetensors", original);
    PackOptions opt;
    opt.chunk_bytes = 64 << 10;  // several chunks per large tensor
    const auto result = pack_file(dir / "m.safetensors", dir / "m.ptwm", opt);
    EXPECT_EQ(result.original_bytes, original.size());
    EXPECT_LT(result.stored_bytes, original.size());

    const auto store = StoreReader::open(dir / "m.ptwm");
    ASSERT_EQ(store->original_size(), original.size());
    std::vector<uint8_t> all(original.size());
    store->read(0, all);
    EXPECT_EQ(all, original);

    // Arbitrary ranges, straddling the header and chunk boundaries.
    std::mt19937 rng(3);
    for (int i = 0; i < 300; ++i) {
        const uint64_t a = rng() % original.size();
        const uint64_t n = rng() % std::min<uint64_t>(original.size() - a, 200000);
        std::vector<uint8_t> part(n);
        store->read(a, part);
        ASSERT_TRUE(std::equal(part.begin(), part.end(), original.begin() + static_cast<long>(a))) << a << "+" << n;
    }
}

TEST(Store, FindChunkIsTheChunkHoldingTheOffset) {
    TempDir dir;
    test::write_file(dir / "m.safetensors", test::make_safetensors(every_dtype_tensors()));
    PackOptions opt;
    opt.chunk_bytes = 4096;
    pack_file(dir / "m.safetensors", dir / "m.ptwm", opt);
    const auto store = StoreReader::open(dir / "m.ptwm");
    for (size_t i = 0; i < store->chunk_count(); ++i) {
        const auto& e = store->chunk(i);
        EXPECT_EQ(store->find_chunk(e.original_offset), i);
        EXPECT_EQ(store->find_chunk(e.original_offset + e.original_length - 1), i);
        EXPECT_LE(e.original_length, 4096u);
    }
}

TEST(Store, EveryLevelAndThreadCountGivesTheSameBytesBack) {
    TempDir dir;
    const auto original = test::make_safetensors(every_dtype_tensors());
    test::write_file(dir / "m.safetensors", original);
    for (int level : {1, 3, 9}) {
        for (unsigned threads : {1u, 3u}) {
            PackOptions opt;
            opt.encode.level = level;
            opt.threads = threads;
            pack_file(dir / "m.safetensors", dir / "m.ptwm", opt);
            const auto store = StoreReader::open(dir / "m.ptwm");
            std::vector<uint8_t> back;
            DecodeAllOptions d;
            d.threads = threads;
            decode_all(*store, d, [&](uint64_t offset, std::span<const uint8_t> bytes) {
                ASSERT_EQ(offset, back.size());
                back.insert(back.end(), bytes.begin(), bytes.end());
            });
            EXPECT_EQ(back, original) << "level " << level << ", " << threads << " threads";
        }
    }
}

// The writer reads batch k + 1 and writes batch k - 1 while it encodes batch
// k, in two sets of buffers: with small chunks and a large tensor a file is
// several batches, and the store must be the same bytes whatever the thread
// count, in the same order.
TEST(Store, ManyBatchesGiveTheSameStoreOnAnyThreadCount) {
    TempDir dir;
    auto tensors = every_dtype_tensors();
    tensors.push_back({"big.bf16", "BF16", {4u << 20}, test::as_bf16_bytes(test::normal_floats(4u << 20, 7))});
    // MXFP4 blocks of noise: fp4-tables codes them a little larger than
    // they are, so their batches' payloads cannot be gathered in the space
    // of their chunks (the writer's other path).
    std::mt19937 rng(3);
    std::vector<uint8_t> blocks(20000 * 16), scales(20000);
    for (auto& b : blocks) b = static_cast<uint8_t>(rng());
    for (auto& s : scales) s = static_cast<uint8_t>(120 + rng() % 8);
    tensors.push_back({"noise.blocks", "U8", {20000, 16}, blocks});
    tensors.push_back({"noise.scales", "U8", {20000}, scales});
    const auto original = test::make_safetensors(tensors);
    test::write_file(dir / "m.safetensors", original);
    std::vector<std::vector<uint8_t>> stores;
    for (unsigned threads : {1u, 2u, 3u}) {
        PackOptions opt;
        opt.chunk_bytes = 4096;
        opt.threads = threads;
        const PackResult r = pack_file(dir / "m.safetensors", dir / "m.ptwm", opt);
        EXPECT_GE(r.batches, 3u) << threads << " threads: too few batches to reuse the buffers";
        stores.push_back(read_whole_file(dir / "m.ptwm"));
        const auto store = StoreReader::open(dir / "m.ptwm");
        std::vector<uint8_t> back;
        decode_all(*store, {}, [&](uint64_t, std::span<const uint8_t> bytes) { back.insert(back.end(), bytes.begin(), bytes.end()); });
        EXPECT_EQ(back, original) << threads << " threads";
    }
    EXPECT_EQ(stores[0], stores[1]);
    EXPECT_EQ(stores[0], stores[2]);
}

// decode_all hands batch k to the sink on its own thread while batch k + 1
// decodes into the other buffer: with small batches the sink must still see
// every byte once, in order, and its errors must reach the caller.
TEST(Store, DecodeAllSinksSmallBatchesInOrderFromItsOwnThread) {
    TempDir dir;
    const auto original = test::make_safetensors(every_dtype_tensors());
    test::write_file(dir / "m.safetensors", original);
    PackOptions p;
    p.chunk_bytes = 4096;
    pack_file(dir / "m.safetensors", dir / "m.ptwm", p);
    const auto store = StoreReader::open(dir / "m.ptwm");
    for (unsigned threads : {1u, 3u}) {
        DecodeAllOptions d;
        d.threads = threads;
        d.batch_bytes = 4096;
        std::vector<uint8_t> back;
        size_t calls = 0;
        decode_all(*store, d, [&](uint64_t offset, std::span<const uint8_t> bytes) {
            ++calls;
            ASSERT_EQ(offset, back.size());
            back.insert(back.end(), bytes.begin(), bytes.end());
        });
        EXPECT_EQ(back, original) << threads << " threads";
        EXPECT_GT(calls, 100u);
    }
    size_t calls = 0;
    DecodeAllOptions d;
    d.batch_bytes = 4096;
    EXPECT_THROW(decode_all(*store, d,
                            [&](uint64_t offset, std::span<const uint8_t>) {
                                ++calls;
                                if (offset > 100000) throw Error("disk full");
                            }),
                 Error);
    EXPECT_LT(calls, store->chunk_count());  // stopped at the error, not run to the end
}

TEST(Store, BadInputLeavesNoOutputBehind) {
    TempDir dir;
    auto bytes = test::make_safetensors(every_dtype_tensors());
    bytes.pop_back();  // the last tensor now runs past the end of the file
    test::write_file(dir / "bad.safetensors", bytes);
    try {
        pack_file(dir / "bad.safetensors", dir / "bad.ptwm", {});
        FAIL() << "a truncated file was packed";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("bad.safetensors"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("past the end of the file"), std::string::npos) << e.what();
    }
    // Nothing at the destination and no temporary left beside it.
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(Store, CorpusFilesRoundTripAndBeatTheirZstdRatios) {
    const auto corpus = test::corpus_dir();
    if (!std::filesystem::exists(corpus)) GTEST_SKIP() << "no corpus at " << corpus << " (../shared/corpus): skipped";
    TempDir dir;
    size_t files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
        if (entry.path().extension() != ".safetensors") continue;
        ++files;
        const auto out = dir / (entry.path().filename().string() + ".ptwm");
        const auto r = pack_file(entry.path(), out, {});
        const auto original = test::read_file(entry.path());
        const auto store = StoreReader::open(out);
        std::vector<uint8_t> back(store->original_size());
        store->read(0, back);
        EXPECT_EQ(back, original) << entry.path();
        // Lossless and smaller: below the raw size on every real weight file.
        EXPECT_LT(r.stored_bytes, r.original_bytes) << entry.path();
    }
    EXPECT_GT(files, 0u);
}

// One copy of the header's bytes per reader: header() parses the bytes
// prefix() serves and keeps them where they are (the mount holds spans into
// them across calls), rather than copying them.
TEST(Store, HeaderKeepsThePrefixBytesWherePrefixServesThem) {
    TempDir dir;
    const auto original = test::make_safetensors({{"b", "U8", {2}, {1, 2}}, {"a", "U8", {1}, {3}}}, R"({"k":"v"})");
    test::write_file(dir / "m.safetensors", original);
    pack_file(dir / "m.safetensors", dir / "m.ptwm", {});
    const auto store = StoreReader::open(dir / "m.ptwm");
    const std::span<const uint8_t> before = store->prefix();
    const size_t memory = store->memory_bytes();

    const SafetensorsHeader& h = store->header();
    EXPECT_EQ(h.prefix.data(), before.data());
    EXPECT_EQ(store->prefix().data(), before.data());
    EXPECT_EQ(store->prefix().size(), before.size());
    EXPECT_TRUE(std::equal(before.begin(), before.end(), original.begin()));
    EXPECT_EQ(h.data_begin(), before.size());
    EXPECT_EQ(h.tensors[0].name, "b");
    EXPECT_EQ(store->memory_bytes(), memory);
    std::vector<uint8_t> back(store->original_size());
    store->read(0, back);
    EXPECT_EQ(back, original);
}

TEST(Safetensors, HeaderIsKeptVerbatimAndTensorsSortedByOffset) {
    const auto bytes = test::make_safetensors({{"b", "U8", {2}, {1, 2}}, {"a", "U8", {1}, {3}}}, R"({"k":"v"})");
    const auto h = parse_safetensors(bytes, bytes.size(), "x.safetensors");
    ASSERT_EQ(h.tensors.size(), 2u);
    EXPECT_EQ(h.tensors[0].name, "b");
    EXPECT_EQ(h.tensors[1].begin, h.prefix.size() + 2);
    EXPECT_TRUE(std::equal(h.prefix.begin(), h.prefix.end(), bytes.begin()));
    EXPECT_EQ(h.metadata_json, R"({"k":"v"})");
}

// The reader hands the bytes it decoded (and later its own) to the parse: a
// copy there is a second header held, up to 100 MB.
TEST(Safetensors, ParsingOwnedBytesKeepsTheirBufferAsThePrefix) {
    const auto bytes = test::make_safetensors({{"b", "U8", {2}, {1, 2}}, {"a", "U8", {1}, {3}}}, R"({"k":"v"})");
    const auto copied = parse_safetensors(bytes, bytes.size(), "x.safetensors");
    std::vector<uint8_t> head = bytes;  // the whole file: the parse keeps only the header's bytes
    const uint8_t* buffer = head.data();
    const auto h = parse_safetensors(std::move(head), bytes.size(), "x.safetensors");
    EXPECT_EQ(h.prefix.data(), buffer);
    EXPECT_EQ(h.prefix, copied.prefix);
    ASSERT_EQ(h.tensors.size(), copied.tensors.size());
    for (size_t i = 0; i < h.tensors.size(); ++i) {
        EXPECT_EQ(h.tensors[i].name, copied.tensors[i].name);
        EXPECT_EQ(h.tensors[i].begin, copied.tensors[i].begin);
        EXPECT_EQ(h.tensors[i].end, copied.tensors[i].end);
    }
    EXPECT_EQ(h.by_name, copied.by_name);
    EXPECT_EQ(h.metadata_json, copied.metadata_json);
}

TEST(Safetensors, ParsingOwnedBytesThatFailLeavesThemAsTheyWere) {
    // A byte after the last tensor: found once the whole JSON has been read.
    const auto bytes = test::make_safetensors({{"a", "U8", {1}, {3}}}, "");
    std::vector<uint8_t> head = bytes;
    EXPECT_THROW(parse_safetensors(std::move(head), bytes.size() + 1, "x.safetensors"), Error);
    EXPECT_EQ(head, bytes);  // moved from, but a parse that throws keeps its bytes
}

}  // namespace
// The context models (FP8 bytes at the slow levels, block scales at every
// level) take contexts from the tensor's shape and the chunk's place in it:
// a store whose F8 tensor spans several chunks and whose scale tensors are
// shaped and flat must decode byte for byte, and the models must be used.
TEST(Store, ContextModelledTensorsRoundTripAcrossChunks) {
    TempDir dir;
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0, 1);
    // F8_E4M3-like bytes with per-channel magnitudes: [3, 3, 16, 64].
    std::vector<uint8_t> f8(3 * 3 * 16 * 64);
    for (size_t i = 0; i < f8.size(); ++i) {
        const int e = std::clamp(6 + static_cast<int>(i / 64 % 16 / 4) + static_cast<int>(normal(rng)), 0, 15);
        f8[i] = static_cast<uint8_t>((rng() & 0x80) | e << 3 | (rng() & 7));
    }
    // Block scales with channel levels, shaped [3, 3, 16, 2] and flat.
    std::vector<uint8_t> scales(3 * 3 * 16 * 2);
    for (size_t i = 0; i < scales.size(); ++i)
        scales[i] = static_cast<uint8_t>(120 + i / 2 % 16 / 5 + (rng() % 4 == 0));
    const auto original = test::make_safetensors({{"w", "F8_E4M3", {3, 3, 16, 64}, f8},
                                                  {"s4", "U8", {3, 3, 16, 2}, scales},
                                                  {"s1", "U8", {scales.size()}, scales}});
    test::write_file(dir / "m.safetensors", original);
    PackOptions opt;
    opt.encode.level = 9;
    opt.chunk_bytes = 2048;  // the F8 tensor in several chunks
    pack_file(dir / "m.safetensors", dir / "m.ptwm", opt);
    const auto store = StoreReader::open(dir / "m.ptwm");
    std::vector<uint8_t> back(original.size());
    store->read(0, back);
    EXPECT_EQ(back, original);
    std::set<Codec> used;
    for (size_t i = 0; i < store->chunk_count(); ++i) used.insert(store->chunk(i).codec[0]);
    EXPECT_TRUE(used.count(Codec::f8_model)) << "the FP8 model is never chosen at level 9";
    EXPECT_TRUE(used.count(Codec::scale_model)) << "the scale model is never chosen";
}

}  // namespace ptwm
