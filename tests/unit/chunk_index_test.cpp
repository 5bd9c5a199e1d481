// The compact in-memory chunk index must give back every field of every
// entry exactly as the store's index holds it, find the chunk holding any
// byte, and stay within its memory budget.
#include <gtest/gtest.h>

#include <array>
#include <random>

#include "ptwm/base/error.hpp"
#include "ptwm/base/file_io.hpp"
#include "ptwm/store/chunk_index.hpp"
#include "ptwm/store/store_format.hpp"
#include "ptwm/store/store_reader.hpp"
#include "ptwm/store/store_writer.hpp"
#include "test_files.hpp"

namespace ptwm {
namespace {

// Entries compared through their on-disk form: every field, byte for byte.
std::array<uint8_t, kChunkEntryBytes> encoded(const ChunkEntry& e) {
    std::array<uint8_t, kChunkEntryBytes> out{};
    encode_chunk_entry(e, out);
    return out;
}

// Chunks tiling [data_begin, ...) with random lengths (some at the 256 MiB
// maximum, so block sums pass 4 GiB), decompositions of 1 to 4 planes,
// codecs, checksums and tensors; payloads back to back, or with gaps.
std::vector<ChunkEntry> random_entries(size_t n, bool gaps, uint32_t seed) {
    std::mt19937_64 rng(seed);
    const Decomposition forms[] = {Decomposition::stream, Decomposition::bf16_exponent, Decomposition::f32_exponent,
                                   Decomposition::nibble_split, Decomposition::split8};
    std::vector<ChunkEntry> entries;
    uint64_t original = 1234, stored = 128 + 999;
    for (size_t i = 0; i < n; ++i) {
        ChunkEntry e;
        e.original_offset = original;
        e.stored_offset = stored + (gaps && rng() % 3 == 0 ? rng() % 5000 : 0);
        e.checksum = rng();
        e.original_length = rng() % 50 == 0 ? kMaxChunkBytes : 1 + static_cast<uint32_t>(rng() % (1 << 20));
        e.tensor = static_cast<uint32_t>(i / 7);
        e.decomposition = forms[rng() % std::size(forms)];
        e.plane_count = static_cast<uint8_t>(plane_count(e.decomposition));
        for (unsigned p = 0; p < e.plane_count; ++p) {
            e.codec[p] = static_cast<Codec>(rng() % 4);
            e.payload_length[p] = 1 + static_cast<uint32_t>(rng() % (e.original_length + 100));
        }
        if (rng() % 10 == 0) {
            e.scale_tensor = static_cast<uint32_t>(rng() % 100);
            e.group_base = static_cast<uint8_t>(rng());
        }
        original += e.original_length;
        stored = e.stored_offset + e.stored_length();
        entries.push_back(e);
    }
    return entries;
}

ChunkIndex build(const std::vector<ChunkEntry>& entries) {
    ChunkIndex index;
    index.reserve(entries.size());
    for (const auto& e : entries) index.push_back(e);
    index.finish();
    return index;
}

void expect_same_as(const ChunkIndex& index, const std::vector<ChunkEntry>& entries) {
    ASSERT_EQ(index.size(), entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
        const ChunkEntry& want = entries[i];
        ASSERT_EQ(encoded(index.entry(i)), encoded(want)) << "entry " << i;
        ASSERT_EQ(index.original_offset(i), want.original_offset) << i;
        ASSERT_EQ(index.original_length(i), want.original_length) << i;
        ASSERT_EQ(index.tensor(i), want.tensor) << i;
        ASSERT_EQ(index.is_raw(i), want.decomposition == Decomposition::stream && want.codec[0] == Codec::raw) << i;
        // Its first and last byte, and the bytes either side of a boundary.
        ASSERT_EQ(index.find(want.original_offset), i);
        ASSERT_EQ(index.find(want.original_offset + want.original_length - 1), i);
        if (want.original_length > 1) {
            ASSERT_EQ(index.find(want.original_offset + 1), i);
        }
    }
}

TEST(ChunkIndex, EveryFieldRoundTripsAndFindHitsEveryBoundary) {
    for (size_t n : {size_t{1}, ChunkIndex::kBlock - 1, ChunkIndex::kBlock, ChunkIndex::kBlock + 1, size_t{1000}}) {
        SCOPED_TRACE(n);
        const auto entries = random_entries(n, false, static_cast<uint32_t>(n));
        expect_same_as(build(entries), entries);
    }
}

TEST(ChunkIndex, GapsBetweenPayloadsAreKept) {
    const auto entries = random_entries(777, true, 5);
    expect_same_as(build(entries), entries);
    // A gap first seen late in the index: the ones before it were zero.
    auto late = random_entries(100, false, 6);
    for (size_t i = 70; i < late.size(); ++i) late[i].stored_offset += 4096;
    expect_same_as(build(late), late);
}

TEST(ChunkIndex, FindPastTheLastChunkStartIsTheLastChunk) {
    const auto entries = random_entries(40, false, 7);
    const ChunkIndex index = build(entries);
    const ChunkEntry& last = entries.back();
    EXPECT_EQ(index.find(last.original_offset + last.original_length - 1), entries.size() - 1);
    EXPECT_EQ(index.find(entries.front().original_offset), 0u);
}

TEST(ChunkIndex, TwoPlaneChunksTakeAtMost32BytesEach) {
    // As a BF16 model packs: two planes, a handful of codings.
    std::vector<ChunkEntry> entries;
    uint64_t original = 4096, stored = 8192;
    for (size_t i = 0; i < 100000; ++i) {
        ChunkEntry e;
        e.original_offset = original;
        e.stored_offset = stored;
        e.checksum = i * 0x9E3779B97F4A7C15ull;
        e.original_length = 256 << 10;
        e.tensor = static_cast<uint32_t>(i / 64);
        e.decomposition = Decomposition::bf16_exponent;
        e.plane_count = 2;
        e.codec[0] = Codec::raw;
        e.codec[1] = static_cast<Codec>(1 + i % 3);
        e.payload_length[0] = 128 << 10;
        e.payload_length[1] = 40000 + static_cast<uint32_t>(i % 1000);
        original += e.original_length;
        stored += e.stored_length();
        entries.push_back(e);
    }
    const ChunkIndex index = build(entries);
    EXPECT_LE(index.memory_bytes(), 32 * entries.size());
    EXPECT_GE(sizeof(ChunkEntry) * entries.size(), 2.5 * static_cast<double>(index.memory_bytes()));
    expect_same_as(index, entries);
}

// A real store: the reader's entries are the store's own index entries.
TEST(ChunkIndex, ReaderGivesBackTheStoresIndexEntries) {
    test::TempDir dir;
    const auto w = test::normal_floats(300001, 9);
    test::write_file(dir / "m.safetensors",
                     test::make_safetensors({{"a", "BF16", {300001}, test::as_bf16_bytes(w)},
                                             {"b", "F32", {300001}, test::as_f32_bytes(w)},
                                             {"c", "U8", {5}, {1, 2, 3, 4, 5}}}));
    PackOptions opt;
    opt.chunk_bytes = 16 << 10;
    pack_file(dir / "m.safetensors", dir / "m.ptwm", opt);
    const auto store = StoreReader::open(dir / "m.ptwm");
    const auto bytes = test::read_file(dir / "m.ptwm");
    const Superblock& sb = store->superblock();
    const auto index = decode_section(std::span(bytes).subspan(sb.index.offset, sb.index.stored_length), sb.index,
                                      "m.ptwm", "chunk index");
    ASSERT_EQ(store->chunk_count(), sb.chunk_count);
    ASSERT_GT(store->chunk_count(), 3 * ChunkIndex::kBlock);
    for (size_t i = 0; i < store->chunk_count(); ++i) {
        const ChunkEntry want = decode_chunk_entry(
            std::span<const uint8_t, kChunkEntryBytes>(index.data() + i * kChunkEntryBytes, kChunkEntryBytes));
        ASSERT_EQ(encoded(store->chunk(i)), encoded(want)) << i;
    }
    EXPECT_GT(store->memory_bytes(), store->prefix().size());
}

TEST(ChunkIndex, ReadSuperblockRejectsWhatOpenRejectsFirst) {
    test::TempDir dir;
    test::write_file(dir / "m.safetensors", test::make_safetensors({{"c", "U8", {5}, {1, 2, 3, 4, 5}}}));
    pack_file(dir / "m.safetensors", dir / "m.ptwm", PackOptions{});
    auto bytes = test::read_file(dir / "m.ptwm");
    {
        const auto source = LocalFileSource::open(dir / "m.ptwm");
        EXPECT_EQ(StoreReader::read_superblock(*source).original_size,
                  test::read_file(dir / "m.safetensors").size());
    }
    bytes[20] ^= 1;  // inside the superblock: its checksum no longer matches
    test::write_file(dir / "bad.ptwm", bytes);
    const auto source = LocalFileSource::open(dir / "bad.ptwm");
    EXPECT_THROW(StoreReader::read_superblock(*source), Error);
}

}  // namespace
}  // namespace ptwm
