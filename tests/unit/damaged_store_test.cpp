// Damaged input, made by hand: every case asserts the error it must give --
// the exception type, a substring naming what is wrong, and the file's name --
// so a damaged model is reported, never half-read or crashed on.
//
// Store cases pack a small valid safetensors file, then rebuild the store
// from a model (header, chunk data, index) with raw sections and fresh
// checksums, so a damaged field gets past the checksums and reaches the check
// meant for it.
#include <gtest/gtest.h>
#include <htscodecs/rANS_static4x16.h>
#include <htscodecs/varint.h>
#include <stdlib.h>
#include <xxhash.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "damaged_input.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/codecs/codec.hpp"
#include "ptwm/store/chunk_codec.hpp"
#include "ptwm/store/safetensors.hpp"
#include "ptwm/store/store_format.hpp"
#include "ptwm/store/store_reader.hpp"
#include "ptwm/store/store_writer.hpp"

namespace {

using namespace damaged;

// ---------------------------------------------------------------------------
// Stores

// A store taken apart: everything the reader checks, editable, and put back
// together by assemble() with raw sections and fresh checksums.
struct StoreModel {
    ptwm::Superblock sb;
    Bytes prefix;                          // the decoded safetensors header section
    Bytes chunk_data;                      // all chunk payloads, back to back
    std::vector<ptwm::ChunkEntry> entries; // stored_offset relative to chunk_data
};

// Layout: superblock | prefix | chunk data | index. Returns the file bytes.
Bytes assemble(StoreModel m) {
    Bytes out(ptwm::kSuperblockBytes);
    m.sb.prefix = {out.size(), m.prefix.size(), m.prefix.size(), XXH3_64bits(m.prefix.data(), m.prefix.size()),
                   ptwm::Codec::raw};
    out.insert(out.end(), m.prefix.begin(), m.prefix.end());
    const uint64_t data_at = out.size();
    out.insert(out.end(), m.chunk_data.begin(), m.chunk_data.end());
    Bytes index(m.entries.size() * ptwm::kChunkEntryBytes);
    for (size_t i = 0; i < m.entries.size(); ++i) {
        ptwm::ChunkEntry e = m.entries[i];
        e.stored_offset += data_at;
        ptwm::encode_chunk_entry(e, std::span<uint8_t, ptwm::kChunkEntryBytes>(index.data() + i * ptwm::kChunkEntryBytes,
                                                                             ptwm::kChunkEntryBytes));
    }
    m.sb.index = {out.size(), index.size(), index.size(), XXH3_64bits(index.data(), index.size()), ptwm::Codec::raw};
    out.insert(out.end(), index.begin(), index.end());
    ptwm::encode_superblock(m.sb, std::span<uint8_t, ptwm::kSuperblockBytes>(out.data(), ptwm::kSuperblockBytes));
    return out;
}

void reseal_superblock(Bytes& store) {
    // Superblock fields edited in place: recompute its checksum (XXH3-64 of
    // everything before it, in its last 8 bytes) so the reader gets to the
    // field itself.
    constexpr size_t at = ptwm::kSuperblockBytes - 8;
    const uint64_t sum = XXH3_64bits(store.data(), at);
    for (int i = 0; i < 8; ++i) store[at + i] = static_cast<uint8_t>(sum >> (8 * i));
}

class DamagedStore : public ::testing::Test {
protected:
    // Tensors, in file order, and the chunks pack makes of them at 4 KiB:
    //   a.weight  BF16 [4096]  8192 bytes: chunks 0, 1 (bf16-exponent planes)
    //   b.pattern U8   [8192]  a period-64 byte pattern: chunks 2, 3 (zstd)
    //   c.noise   U8   [1000]  random bytes: chunk 4 (one raw plane)
    static constexpr size_t kPatternChunk = 2, kNoiseChunk = 4;

    void SetUp() override {
        std::mt19937 rng(7);
        Bytes data;
        std::normal_distribution<float> normal(0, 0.02f);
        for (int i = 0; i < 4096; ++i) {
            const float f = normal(rng);
            uint32_t u;
            std::memcpy(&u, &f, 4);
            data.push_back(static_cast<uint8_t>(u >> 16));
            data.push_back(static_cast<uint8_t>(u >> 24));
        }
        Bytes period(64);
        for (auto& b : period) b = static_cast<uint8_t>(rng());
        for (int i = 0; i < 8192; ++i) data.push_back(period[i % 64]);
        for (int i = 0; i < 1000; ++i) data.push_back(static_cast<uint8_t>(rng()));
        std::string json = R"({"a.weight":{"dtype":"BF16","shape":[4096],"data_offsets":[0,8192]},)"
                           R"("b.pattern":{"dtype":"U8","shape":[8192],"data_offsets":[8192,16384]},)"
                           R"("c.noise":{"dtype":"U8","shape":[1000],"data_offsets":[16384,17384]}})";
        original_ = safetensors(json, data);
        write_file(dir_.file("model.safetensors"), original_);

        ptwm::PackOptions opt;
        opt.chunk_bytes = 4096;
        opt.threads = 1;
        packed_path_ = dir_.file("packed.ptwm");
        ptwm::pack_file(dir_.file("model.safetensors"), packed_path_, opt);
        packed_ = read_file(packed_path_);

        const auto reader = ptwm::StoreReader::open(packed_path_);
        model_.sb = reader->superblock();
        model_.prefix.assign(reader->prefix().begin(), reader->prefix().end());
        const uint64_t data_at = model_.sb.prefix.offset + model_.sb.prefix.stored_length;
        model_.chunk_data.assign(packed_.begin() + static_cast<std::ptrdiff_t>(data_at),
                                 packed_.begin() + static_cast<std::ptrdiff_t>(model_.sb.index.offset));
        for (size_t i = 0; i < reader->chunk_count(); ++i) {
            model_.entries.push_back(reader->chunk(i));
            model_.entries.back().stored_offset -= data_at;
        }
        // The cases rely on this layout: fail loudly if pack chose otherwise.
        ASSERT_EQ(model_.entries.size(), 5u);
        ASSERT_EQ(model_.entries[kPatternChunk].codec[0], ptwm::Codec::zstd);
        ASSERT_EQ(model_.entries[kPatternChunk + 1].codec[0], ptwm::Codec::zstd);
        ASSERT_EQ(model_.entries[kNoiseChunk].codec[0], ptwm::Codec::raw);
    }

    // Writes `bytes` as the damaged store and returns its path.
    std::string write_store(const Bytes& bytes) {
        const std::string path = dir_.file("damaged.ptwm");
        write_file(path, bytes);
        return path;
    }
    // Expects StoreReader::open of `bytes` to throw Error naming the file and
    // saying each of `needles`.
    void expect_open_error(const Bytes& bytes, std::initializer_list<std::string> needles) {
        const std::string path = write_store(bytes);
        expect_error([&] { ptwm::StoreReader::open(path); }, needles);
        expect_error([&] { ptwm::StoreReader::open(path); }, {path});
    }
    Bytes original_chunk(size_t i) const {
        const auto& e = model_.entries[i];
        return {original_.begin() + static_cast<std::ptrdiff_t>(e.original_offset),
                original_.begin() + static_cast<std::ptrdiff_t>(e.original_offset + e.original_length)};
    }

    TempDir dir_;
    Bytes original_;
    std::string packed_path_;
    Bytes packed_;
    StoreModel model_;
};

TEST_F(DamagedStore, UndamagedStoresOpenAndDecode) {
    // Both the packed store and its reassembled raw-section twin are valid:
    // every failure below comes from the one thing each case damages.
    for (const Bytes& bytes : {packed_, assemble(model_)}) {
        const auto reader = ptwm::StoreReader::open(write_store(bytes));
        Bytes all(original_.size());
        reader->read(0, all);
        EXPECT_EQ(all, original_);
    }
}

TEST_F(DamagedStore, TruncatedAtEverySectionBoundary) {
    const ptwm::Superblock sb = ptwm::StoreReader::open(packed_path_)->superblock();  // a copy: the reader is a temporary
    const uint64_t data_at = sb.prefix.offset + sb.prefix.stored_length;
    struct Cut {
        uint64_t size;
        const char* says;
    };
    const Cut cuts[] = {
        {0, "shorter than a superblock"},
        {ptwm::kSuperblockBytes / 2, "shorter than a superblock"},
        {ptwm::kSuperblockBytes - 1, "shorter than a superblock"},
        {ptwm::kSuperblockBytes, "the safetensors header"},  // superblock only
        {sb.prefix.offset + sb.prefix.stored_length / 2, "the safetensors header"},
        {data_at, "the chunk index"},  // header complete, no chunk data
        {(data_at + sb.index.offset) / 2, "the chunk index"},
        {sb.index.offset, "the chunk index"},  // chunk data complete, no index
        {sb.index.offset + sb.index.stored_length / 2, "the chunk index"},
        {packed_.size() - 1, "the chunk index"},
    };
    for (const Cut& cut : cuts) {
        SCOPED_TRACE("truncated to " + std::to_string(cut.size) + " bytes");
        const Bytes truncated(packed_.begin(), packed_.begin() + static_cast<std::ptrdiff_t>(cut.size));
        if (cut.size < ptwm::kSuperblockBytes)
            expect_open_error(truncated, {"not a ptwmfs store", cut.says});
        else
            expect_open_error(truncated, {"truncated or damaged", cut.says, "lies outside the store"});
    }
}

TEST_F(DamagedStore, WrongMagic) {
    Bytes b = packed_;
    b[0] = 'Q';
    expect_open_error(b, {"not a ptwmfs store (wrong magic)"});
}

TEST_F(DamagedStore, FutureVersion) {
    StoreModel m = model_;
    m.sb.version = ptwm::kStoreVersion + 1;
    expect_open_error(assemble(m), {"store format version " + std::to_string(ptwm::kStoreVersion + 1) + " is not supported"});
    // (Its superblock checksum holds: no word of damage.)
    const std::string path = write_store(assemble(m));
    try {
        ptwm::StoreReader::open(path);
        FAIL() << "opened";
    } catch (const ptwm::Error& e) {
        EXPECT_EQ(std::string(e.what()).find("superblock is damaged"), std::string::npos) << e.what();
    }
}

TEST_F(DamagedStore, DamagedVersionFieldSaysTheStoreMayBeDamaged) {
    // One flipped bit of the version field: version 257, say. Checked
    // before the checksum, it must not read as a store a newer build makes.
    Bytes b = packed_;
    b[9] ^= 1;
    expect_open_error(b, {"store format version " + std::to_string(ptwm::kStoreVersion ^ 0x100) + " is not supported",
                          "or the superblock is damaged: its checksum does not match"});
}

TEST_F(DamagedStore, SuperblockChecksumMismatch) {
    Bytes b = packed_;
    b[16] ^= 1;  // original_size
    expect_open_error(b, {"superblock checksum mismatch"});
}

TEST_F(DamagedStore, UnknownSuperblockFlags) {
    StoreModel m = model_;
    m.sb.flags = 4;
    expect_open_error(assemble(m), {"unknown superblock flags 4"});
}

TEST_F(DamagedStore, HeaderChecksumMismatch) {
    Bytes b = assemble(model_);
    b[ptwm::kSuperblockBytes + 20] ^= 0x20;  // a letter of the JSON, flipped in case
    expect_open_error(b, {"the safetensors header is damaged (checksum mismatch)"});
}

TEST_F(DamagedStore, IndexChecksumMismatch) {
    Bytes b = assemble(model_);
    b[b.size() - 3] ^= 1;  // the last entry's last payload length
    expect_open_error(b, {"the chunk index is damaged (checksum mismatch)"});
}

TEST_F(DamagedStore, CompressedIndexDamaged) {
    // The packed store keeps its index as a zstd frame: damage inside the
    // frame must be reported as index damage, whichever check catches it.
    const ptwm::Superblock sb = ptwm::StoreReader::open(packed_path_)->superblock();
    ASSERT_EQ(sb.index.codec, ptwm::Codec::zstd);
    Bytes b = packed_;
    for (uint64_t k = sb.index.offset + 4; k < sb.index.offset + sb.index.stored_length - 4; ++k) b[k] ^= 0x5A;
    expect_open_error(b, {"the chunk index is damaged"});
}

TEST_F(DamagedStore, IndexClaimsMoreChunksThanTheFileCouldHold) {
    Bytes b = packed_;
    for (int i = 0; i < 8; ++i) b[24 + i] = i == 5 ? 1 : 0;  // chunk_count = 2^40
    reseal_superblock(b);
    expect_open_error(b, {"the index claims 1099511627776 chunks"});
}

TEST_F(DamagedStore, HeaderLengthOutOfBounds) {
    Bytes b = packed_;
    for (int i = 0; i < 8; ++i) b[32 + 16 + i] = i == 0 ? 4 : 0;  // prefix section length = 4
    reseal_superblock(b);
    expect_open_error(b, {"the safetensors header length 4 is out of bounds"});
}

// A superblock may claim a header section of up to the 100 MiB bound; open
// must see that its stored bytes cannot hold it (raw: its stored length;
// zstd: its frame's content size) before allocating and clearing that much.
TEST_F(DamagedStore, HeaderSectionClaimsMoreThanItsStoredBytesHold) {
    constexpr uint64_t kClaim = 64u << 20;
    auto claim = [&](Bytes b) {
        for (int i = 0; i < 8; ++i) b[16 + i] = static_cast<uint8_t>((kClaim + 17384) >> (8 * i));  // original size
        for (int i = 0; i < 8; ++i) b[32 + 16 + i] = static_cast<uint8_t>(kClaim >> (8 * i));      // prefix length
        reseal_superblock(b);
        return b;
    };
    ASSERT_EQ(ptwm::StoreReader::open(packed_path_)->superblock().prefix.codec, ptwm::Codec::zstd);
    expect_open_error(claim(packed_), {"the safetensors header is damaged", "zstd frames cannot decode to 67108864 bytes"});
    expect_open_error(claim(assemble(model_)), {"the safetensors header is damaged", "raw bytes where 67108864 are expected"});
}

TEST_F(DamagedStore, IndexSectionOutsideTheFile) {
    Bytes b = packed_;
    const uint64_t past = b.size() + 100;
    for (int i = 0; i < 8; ++i) b[64 + i] = static_cast<uint8_t>(past >> (8 * i));  // index section offset
    reseal_superblock(b);
    expect_open_error(b, {"the chunk index", "at offset " + std::to_string(past) + ") lies outside the store"});
}

TEST_F(DamagedStore, OriginalSizeDisagreesWithTheHeader) {
    StoreModel m = model_;
    m.sb.original_size += 10;
    expect_open_error(assemble(m), {"(stored header)", "10 bytes after the last tensor belong to no tensor"});
}

TEST_F(DamagedStore, HeaderSectionLongerThanItsLengthField) {
    // The header section holds 8 bytes more than the JSON length field says,
    // and the chunks start after them. Accepting this leaves original bytes
    // [prefix, prefix + 8) covered by neither the header nor a chunk: read()
    // there looks up chunk -1 (find_chunk underflows). open must refuse.
    StoreModel m = model_;
    m.prefix.insert(m.prefix.end(), original_.begin() + static_cast<std::ptrdiff_t>(m.prefix.size()),
                    original_.begin() + static_cast<std::ptrdiff_t>(m.prefix.size() + 8));
    m.entries[0].original_offset += 8;
    m.entries[0].original_length -= 8;
    expect_open_error(assemble(m), {"safetensors header", "length field"});
}

TEST_F(DamagedStore, IndexExtentsOverlap) {
    StoreModel m = model_;
    m.entries[1].stored_offset = m.entries[0].stored_offset;
    expect_open_error(assemble(m), {"index entry 1: its payload", "overlaps another chunk or lies outside the chunk data"});
}

TEST_F(DamagedStore, IndexExtentPointsPastTheChunkData) {
    StoreModel m = model_;
    m.entries[kNoiseChunk].stored_offset = m.chunk_data.size() + 50;  // inside the index, or past the file
    expect_open_error(assemble(m), {"index entry 4: its payload", "lies outside the chunk data"});
    m = model_;
    m.entries[kNoiseChunk].payload_length[0] = 0xFFFFFFF0u;
    expect_open_error(assemble(m), {"index entry 4: its payload", "lies outside the chunk data"});
}

TEST_F(DamagedStore, ChunksThatDoNotTileTheData) {
    StoreModel m = model_;
    m.entries[1].original_offset += 2;
    expect_open_error(assemble(m), {"index entry 1: starts at original offset", "chunks must tile the data section"});
}

TEST_F(DamagedStore, ChunkOutsideItsTensor) {
    StoreModel m = model_;
    m.entries[1].tensor = 2;  // chunk 1 holds a.weight bytes, not c.noise
    expect_open_error(assemble(m), {"index entry 1: lies outside its tensor"});
}

// The first codec id past the last one the format defines.
constexpr auto kUnknownCodec = static_cast<ptwm::Codec>(static_cast<uint8_t>(ptwm::Codec::bit_pack) + 1);
const std::string kUnknownCodecText = "unknown codec id " + std::to_string(static_cast<int>(kUnknownCodec));

TEST_F(DamagedStore, CodecIdThatDoesNotExist) {
    StoreModel m = model_;
    m.entries[kPatternChunk].codec[0] = kUnknownCodec;
    expect_open_error(assemble(m), {"index entry 2: plane 0 has " + kUnknownCodecText});
}

TEST_F(DamagedStore, DecompositionIdThatDoesNotExist) {
    StoreModel m = model_;
    m.entries[0].decomposition = static_cast<ptwm::Decomposition>(42);
    expect_open_error(assemble(m), {"index entry 0: unknown decomposition id 42"});
}

TEST_F(DamagedStore, PlaneCountDisagreesWithDecomposition) {
    StoreModel m = model_;
    m.entries[0].plane_count = 1;
    expect_open_error(assemble(m), {"index entry 0: 1 planes where bf16-exponent has 2"});
}

TEST(DamagedModelledChunk, ContextModelOnAChunkOverTheCapIsRefusedAtOpen) {
    // One FP8 tensor a little over the cap, packed at a level that tries the
    // FP8 context model, in one chunk: the writer must keep a static coder
    // (the store opens and decodes), and an index entry that claims the model
    // for that chunk -- a read that would decode megabytes at model speed --
    // must be refused when the store is opened, before any read.
    TempDir dir;
    const size_t n = ptwm::kMaxModelledChunkBytes + 4096;
    std::mt19937 rng(3);
    std::geometric_distribution<int> exponent(0.5);
    Bytes data(n);
    for (auto& b : data) b = static_cast<uint8_t>((rng() & 0x87) | std::min(exponent(rng), 15) << 3);
    write_file(dir.file("big.safetensors"),
               safetensors(R"({"w":{"dtype":"F8_E4M3","shape":[)" + std::to_string(n / 4096) +
                               R"(,4096],"data_offsets":[0,)" + std::to_string(n) + "]}}",
                           data));
    ptwm::PackOptions opt;
    opt.chunk_bytes = 8u << 20;
    opt.threads = 1;
    opt.encode.level = ptwm::kContextModelLevel;
    const std::string packed = dir.file("big.ptwm");
    ptwm::pack_file(dir.file("big.safetensors"), packed, opt);
    Bytes decoded(n);
    {
        const auto reader = ptwm::StoreReader::open(packed);
        ASSERT_EQ(reader->chunk_count(), 1u);
        EXPECT_FALSE(ptwm::is_context_model(reader->chunk(0).codec[0]));
        reader->read(reader->chunk(0).original_offset, decoded);
        EXPECT_EQ(decoded, data);
    }

    // The same store with the entry's plane 0 relabelled f8-model.
    Bytes store = read_file(packed);
    const auto reader = ptwm::StoreReader::open(packed);
    ptwm::ChunkEntry e = reader->chunk(0);
    e.codec[0] = ptwm::Codec::f8_model;
    Bytes index(ptwm::kChunkEntryBytes);
    ptwm::encode_chunk_entry(e, std::span<uint8_t, ptwm::kChunkEntryBytes>(index.data(), ptwm::kChunkEntryBytes));
    ptwm::Superblock sb = reader->superblock();
    // A raw index section appended at the end, then the superblock resealed.
    sb.index = {store.size(), index.size(), index.size(), XXH3_64bits(index.data(), index.size()), ptwm::Codec::raw};
    store.insert(store.end(), index.begin(), index.end());
    ptwm::encode_superblock(sb, std::span<uint8_t, ptwm::kSuperblockBytes>(store.data(), ptwm::kSuperblockBytes));
    const std::string damaged = dir.file("damaged.ptwm");
    write_file(damaged, store);
    expect_error([&] { ptwm::StoreReader::open(damaged); },
                 {damaged, "index entry 0: plane 0 uses f8-model on a chunk of " + std::to_string(n) + " bytes",
                  "over the " + std::to_string(ptwm::kMaxModelledChunkBytes)});
}

TEST_F(DamagedStore, ChecksumMismatchInOneChunkLeavesTheOthersReadable) {
    // One flipped byte in the raw chunk's payload: that chunk, and only it,
    // fails, with a message naming file, chunk, tensor and original offset.
    StoreModel m = model_;
    m.chunk_data[m.entries[kNoiseChunk].stored_offset + 10] ^= 0xFF;
    const std::string path = write_store(assemble(m));
    const auto reader = ptwm::StoreReader::open(path);
    const auto& damaged = reader->chunk(kNoiseChunk);
    Bytes out;
    for (size_t i = 0; i < reader->chunk_count(); ++i) {
        out.resize(reader->chunk(i).original_length);
        if (i == kNoiseChunk) {
            expect_error<ptwm::CorruptData>([&] { reader->decode_chunk(i, out); },
                                            {path, "chunk 4", "tensor 'c.noise'",
                                             "original offset " + std::to_string(damaged.original_offset),
                                             "checksum mismatch"});
        } else {
            reader->decode_chunk(i, out);
            EXPECT_EQ(out, original_chunk(i)) << "chunk " << i;
        }
    }
    // read() over the damaged chunk fails the same way; reads beside it work.
    Bytes part(100);
    expect_error<ptwm::CorruptData>([&] { reader->read(damaged.original_offset + 5, part); }, {"chunk 4", "checksum mismatch"});
    reader->read(damaged.original_offset - 100, part);
    EXPECT_TRUE(std::equal(part.begin(), part.end(), original_.begin() + static_cast<std::ptrdiff_t>(damaged.original_offset - 100)));
}

TEST_F(DamagedStore, ChecksumFieldMismatch) {
    // The bytes are intact but the index promises another checksum.
    StoreModel m = model_;
    m.entries[0].checksum ^= 1;
    const std::string path = write_store(assemble(m));
    const auto reader = ptwm::StoreReader::open(path);
    Bytes out(reader->chunk(0).original_length);
    expect_error<ptwm::CorruptData>([&] { reader->decode_chunk(0, out); },
                                    {path, "chunk 0", "tensor 'a.weight'", "checksum mismatch"});
    out.resize(reader->chunk(1).original_length);
    reader->decode_chunk(1, out);
    EXPECT_EQ(out, original_chunk(1));
}

TEST_F(DamagedStore, DecodedSizeDisagreesWithTheIndex) {
    // Move 64 bytes from one zstd chunk to the next: the chunks still tile
    // the tensor, so open accepts the index, but the frames decode to 4096
    // bytes where the index now says 4032 and 4160.
    StoreModel m = model_;
    m.entries[kPatternChunk].original_length -= 64;
    m.entries[kPatternChunk + 1].original_offset -= 64;
    m.entries[kPatternChunk + 1].original_length += 64;
    // A raw plane one byte shorter than its chunk.
    m.entries[kNoiseChunk].payload_length[0] -= 1;
    const std::string path = write_store(assemble(m));
    const auto reader = ptwm::StoreReader::open(path);
    Bytes out(4032);
    expect_error<ptwm::CorruptData>([&] { reader->decode_chunk(kPatternChunk, out); },
                                    {path, "chunk 2", "tensor 'b.pattern'", "plane 0: zstd plane"});
    out.resize(4160);
    expect_error<ptwm::CorruptData>([&] { reader->decode_chunk(kPatternChunk + 1, out); },
                                    {path, "chunk 3", "zstd plane decodes to 4096 bytes where 4160 are expected"});
    out.resize(1000);
    expect_error<ptwm::CorruptData>([&] { reader->decode_chunk(kNoiseChunk, out); },
                                    {path, "chunk 4", "raw plane of 999 bytes where 1000 are expected"});
}

// ---------------------------------------------------------------------------
// Plane payloads (no file: decode_plane's messages leave naming it to callers)

TEST(DamagedPlane, UnknownCodecId) {
    Bytes out(16);
    expect_error<ptwm::CorruptData>([&] { ptwm::decode_plane(kUnknownCodec, Bytes{1, 2}, out); }, {kUnknownCodecText});
}

TEST(DamagedPlane, ConstantPayloadOfTwoBytes) {
    Bytes out(16);
    expect_error<ptwm::CorruptData>([&] { ptwm::decode_plane(ptwm::Codec::constant, Bytes{1, 2}, out); },
                                    {"constant plane payload is not one byte"});
}

TEST(DamagedPlane, RansPayloadThatClaimsGigabytesOfScratch) {
    // htscodecs sizes the scratch buffer of its RLE transform from a length
    // stored in the payload (up to 2 GiB) before checking it against the
    // output. The encoder never asks for RLE, so a payload flagged with it is
    // damaged and must be refused at once -- not decoded through 256 MiB of
    // scratch (2 GiB and 10 s per read with a larger claim).
    Bytes plane(20000);
    for (size_t i = 0; i < plane.size(); ++i) plane[i] = static_cast<uint8_t>((i / 50) % 7);
    const int flags = RANS_ORDER_RLE | RANS_ORDER_X32;
    unsigned size = rans_compress_bound_4x16(static_cast<unsigned>(plane.size()), flags);
    Bytes payload(size);
    ASSERT_NE(rans_compress_to_4x16(plane.data(), static_cast<unsigned>(plane.size()), payload.data(), &size, flags), nullptr);
    payload.resize(size);
    ASSERT_TRUE(payload[0] & RANS_ORDER_RLE);
    // Layout: flags, output size, RLE metadata size (x2), ... (all varints).
    uint8_t* p = payload.data() + 1;
    uint8_t* const end = payload.data() + payload.size();
    uint32_t v;
    p += var_get_u32(p, end, &v);
    uint8_t* const meta_size = p;
    p += var_get_u32(p, end, &v);
    uint8_t claim[8];
    const int n = var_put_u32(claim, claim + 8, 512u << 20);  // 256 MiB of metadata, even: rANS-coded
    Bytes bomb(payload.data(), meta_size);
    bomb.insert(bomb.end(), claim, claim + n);
    bomb.insert(bomb.end(), p, end);

    Bytes out(plane.size());
    const auto start = std::chrono::steady_clock::now();
    expect_error<ptwm::CorruptData>([&] { ptwm::decode_plane(ptwm::Codec::rans0, bomb, out); }, {"rANS plane"});
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
}

}  // namespace
