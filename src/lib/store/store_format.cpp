#include "ptwm/store/store_format.hpp"


#include <algorithm>
#include <cstring>
#include <memory>

#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_decompressBound
#include <zstd.h>

#include "ptwm/base/checksum.hpp"
#include "ptwm/base/error.hpp"

namespace ptwm {
namespace {

void put_u32(uint8_t* p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}
uint64_t get_u64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

constexpr size_t kSuperblockChecksumAt = kSuperblockBytes - 8;
// Level 6: on the 33 corpus and derived files its sections come to about
// 100 bytes a store more than level 9's, whose binary-tree match finder
// took a twentieth of a small FP8 or FP4 file's pack time.
constexpr int kSectionZstdLevel = 6;

// zstd sizes its match tables for the level, not for the input: level 9 set
// up a workspace of ~1 MiB to compress a 40 KiB header, and its first use
// page-faults all of it in (10 us a page on the VMs ptwmfs runs on: 2.5 ms a
// section, a tenth of packing a small model). Tables sized to the section
// compress the corpus's headers and indexes as well or a little better.
// The first section's workspace is kept for the second.
std::vector<uint8_t> zstd_section(std::span<const uint8_t> bytes) {
    thread_local std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> ctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
    unsigned window = 10;  // zstd's smallest
    while (window < 22 && (size_t{1} << window) < bytes.size()) ++window;
    ZSTD_CCtx_reset(ctx.get(), ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(ctx.get(), ZSTD_c_compressionLevel, kSectionZstdLevel);
    ZSTD_CCtx_setParameter(ctx.get(), ZSTD_c_windowLog, static_cast<int>(window));
    ZSTD_CCtx_setParameter(ctx.get(), ZSTD_c_hashLog, static_cast<int>(window) - 3);
    ZSTD_CCtx_setParameter(ctx.get(), ZSTD_c_chainLog, static_cast<int>(window) - 2);
    std::vector<uint8_t> out(ZSTD_compressBound(bytes.size()));
    const size_t r = ZSTD_compress2(ctx.get(), out.data(), out.size(), bytes.data(), bytes.size());
    if (ZSTD_isError(r)) throw Error(std::string("zstd encoder failed: ") + ZSTD_getErrorName(r));
    out.resize(r);
    return out;
}

void put_section(uint8_t* p, const Section& s) {
    put_u64(p + 0, s.offset);
    put_u64(p + 8, s.stored_length);
    put_u64(p + 16, s.length);
    put_u64(p + 24, s.checksum);
}
Section get_section(const uint8_t* p, uint8_t codec) {
    return {get_u64(p + 0), get_u64(p + 8), get_u64(p + 16), get_u64(p + 24), static_cast<Codec>(codec)};
}

}  // namespace

uint64_t ChunkEntry::stored_length() const {
    uint64_t total = 0;
    for (unsigned p = 0; p < plane_count && p < kMaxPlanes; ++p) total += payload_length[p];
    return total;
}

std::vector<uint8_t> encode_section(std::span<const uint8_t> bytes, Section& section) {
    section.length = bytes.size();
    section.checksum = xxh3(bytes.data(), bytes.size());
    std::vector<uint8_t> zstd = zstd_section(bytes);
    if (zstd.size() < bytes.size()) {
        section.codec = Codec::zstd;
        section.stored_length = zstd.size();
        return zstd;
    }
    section.codec = Codec::raw;
    section.stored_length = bytes.size();
    return {bytes.begin(), bytes.end()};
}

std::vector<uint8_t> decode_section(std::span<const uint8_t> stored, const Section& section, const std::string& what,
                                    const char* name) {
    // Before allocating what the superblock claims: a raw section is its
    // stored bytes, and zstd frames decode to at most ZSTD_decompressBound
    // (their declared content size, which the writer always sets). Else a
    // damaged 128-byte superblock made open() allocate and clear up to the
    // header's 100 MiB bound only to fail the size check after.
    if (section.codec == Codec::raw && stored.size() != section.length)
        throw Error(what + ": the " + name + " is damaged: " + std::to_string(stored.size()) + " raw bytes where " +
                    std::to_string(section.length) + " are expected");
    if (section.codec == Codec::zstd) {
        const unsigned long long bound = ZSTD_decompressBound(stored.data(), stored.size());
        if (bound == ZSTD_CONTENTSIZE_ERROR || bound < section.length)
            throw Error(what + ": the " + name + " is damaged: its zstd frames cannot decode to " +
                        std::to_string(section.length) + " bytes");
    }
    std::vector<uint8_t> out(section.length);
    try {
        decode_plane(section.codec, stored, out);
    } catch (const CorruptData& e) {
        throw Error(what + ": the " + name + " is damaged: " + e.what());
    }
    if (xxh3(out.data(), out.size()) != section.checksum)
        throw Error(what + ": the " + name + " is damaged (checksum mismatch)");
    return out;
}

void encode_superblock(const Superblock& sb, std::span<uint8_t, kSuperblockBytes> out) {
    uint8_t* p = out.data();
    std::memset(p, 0, kSuperblockBytes);
    std::memcpy(p, kStoreMagic.data(), kStoreMagic.size());
    put_u32(p + 8, sb.version);
    put_u32(p + 12, sb.flags);
    put_u64(p + 16, sb.original_size);
    put_u64(p + 24, sb.chunk_count);
    put_section(p + 32, sb.prefix);
    put_section(p + 64, sb.index);
    p[96] = static_cast<uint8_t>(sb.prefix.codec);
    p[97] = static_cast<uint8_t>(sb.index.codec);
    put_u64(p + kSuperblockChecksumAt, xxh3(p, kSuperblockChecksumAt));
}

Superblock decode_superblock(std::span<const uint8_t, kSuperblockBytes> in, const std::string& what) {
    const uint8_t* p = in.data();
    if (!std::equal(kStoreMagic.begin(), kStoreMagic.end(), p)) {
        // A safetensors file begins with its header's length, then '{'.
        const bool safetensors = get_u64(p) > 0 && get_u64(p) < (uint64_t{1} << 32) && p[8] == '{';
        throw Error(what + ": not a ptwmfs store (wrong magic)" +
                    (safetensors ? "; it is a safetensors file, which 'ptwmfs-tool pack' makes a store of" : ""));
    }
    Superblock sb;
    sb.version = get_u32(p + 8);
    const bool checksum_holds = get_u64(p + kSuperblockChecksumAt) == xxh3(p, kSuperblockChecksumAt);
    // The version comes first (a later format may lay out or check its
    // superblock otherwise), but a damaged version field reads as some
    // version in the millions: where the checksum fails as well, say that
    // the store may be damaged, not only that a newer build is needed.
    if (sb.version != kStoreVersion)
        throw Error(what + ": store format version " + std::to_string(sb.version) + " is not supported (this build reads version " +
                    std::to_string(kStoreVersion) + ")" +
                    (checksum_holds ? "" : ", or the superblock is damaged: its checksum does not match"));
    if (!checksum_holds)
        throw Error(what + ": superblock checksum mismatch (the store's first " + std::to_string(kSuperblockBytes) +
                    " bytes are damaged)");
    sb.flags = get_u32(p + 12);
    sb.original_size = get_u64(p + 16);
    sb.chunk_count = get_u64(p + 24);
    sb.prefix = get_section(p + 32, p[96]);
    sb.index = get_section(p + 64, p[97]);
    if (sb.flags != 0) throw Error(what + ": unknown superblock flags " + std::to_string(sb.flags));
    for (const Section* s : {&sb.prefix, &sb.index})
        if (s->codec != Codec::raw && s->codec != Codec::zstd)
            throw Error(what + ": unknown section codec id " + std::to_string(static_cast<int>(s->codec)));
    return sb;
}

void encode_chunk_entry(const ChunkEntry& e, std::span<uint8_t, kChunkEntryBytes> out) {
    uint8_t* p = out.data();
    std::memset(p, 0, kChunkEntryBytes);
    put_u64(p + 0, e.original_offset);
    put_u64(p + 8, e.stored_offset);
    put_u64(p + 16, e.checksum);
    put_u32(p + 24, e.original_length);
    put_u32(p + 28, e.tensor);
    p[32] = static_cast<uint8_t>(e.decomposition);
    p[33] = e.plane_count;
    for (unsigned i = 0; i < kMaxPlanes; ++i) p[34 + i] = static_cast<uint8_t>(e.codec[i]);
    put_u32(p + 42, e.scale_tensor);
    p[46] = e.group_base;
    for (unsigned i = 0; i < kMaxPlanes; ++i) put_u32(p + 48 + 4 * i, e.payload_length[i]);
}

ChunkEntry decode_chunk_entry(std::span<const uint8_t, kChunkEntryBytes> in) {
    const uint8_t* p = in.data();
    ChunkEntry e;
    e.original_offset = get_u64(p + 0);
    e.stored_offset = get_u64(p + 8);
    e.checksum = get_u64(p + 16);
    e.original_length = get_u32(p + 24);
    e.tensor = get_u32(p + 28);
    e.decomposition = static_cast<Decomposition>(p[32]);
    e.plane_count = p[33];
    for (unsigned i = 0; i < kMaxPlanes; ++i) e.codec[i] = static_cast<Codec>(p[34 + i]);
    e.scale_tensor = get_u32(p + 42);
    e.group_base = p[46];
    for (unsigned i = 0; i < kMaxPlanes; ++i) e.payload_length[i] = get_u32(p + 48 + 4 * i);
    return e;
}

}  // namespace ptwm
