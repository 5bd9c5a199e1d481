// libFuzzer target: opening a store and reading everything it holds.
//
// The input is a store file. Before it is opened, the harness rewrites the
// checksums of the header and index sections (when they lie inside the input
// and decode) and then the superblock's own checksum: a fuzzer cannot guess
// XXH3 values, and without this every mutation would stop at the first
// checksum and the validation behind it would never run. Chunk checksums are
// left alone: they are checked after decoding, so mutated payloads still go
// through every decoder. The checksum checks themselves are covered by
// tests/unit/damaged_store_test.cpp.
//
// The store lives in a memfd opened by its /proc/self/fd path, so the
// fuzzer touches no disk. Outcomes allowed: ptwm::Error (open or read
// rejects the store) or CorruptData (a chunk does not decode).
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_decompressBound
#include <zstd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ptwm/base/error.hpp"
#include "ptwm/codecs/codec.hpp"
#include "ptwm/store/store_format.hpp"
#include "ptwm/store/store_reader.hpp"

namespace {

// Bytes read per random read(): enough to span several chunks of the seeds.
constexpr uint64_t kMaxReadBytes = 1u << 20;
// Superblock layout (store_format.cpp): two sections of {offset,
// stored_length, length, checksum} at 32 and 64, their codec ids at 96 and 97,
// and the superblock's own checksum in its last 8 bytes.
constexpr size_t kPrefixSectionAt = 32, kIndexSectionAt = 64, kPrefixCodecAt = 96, kIndexCodecAt = 97,
                 kSuperChecksumAt = ptwm::kSuperblockBytes - 8;
// Sections are decoded for their checksum only up to this size (the reader
// itself allocates what the superblock claims; that is its business).
constexpr uint64_t kMaxSectionBytes = 64u << 20;

uint64_t get_u64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}
void put_u64(uint8_t* p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Sets a section's checksum to that of its decoded bytes, when it decodes.
// Only sections the reader would decode: it rejects any codec but raw and
// zstd before it looks at a checksum, and a raw section whose stored length
// is not its length, or a zstd one whose frames cannot decode to it, fail
// whatever the checksum. Decoding those here anyway (with a context model,
// up to kMaxSectionBytes of output from an empty payload) changed no
// outcome but was 88% of a drifted corpus's time: such inputs took 20 ms
// to 2.5 s each under ASan, and the fuzzer slowed from ~3000 to ~250
// executions a second within minutes.
void fix_section(std::vector<uint8_t>& s, size_t at, uint8_t codec_id) {
    uint8_t* f = s.data() + at;
    const uint64_t offset = get_u64(f), stored = get_u64(f + 8), length = get_u64(f + 16);
    if (offset > s.size() || stored > s.size() - offset || length > kMaxSectionBytes) return;
    const auto codec = static_cast<ptwm::Codec>(codec_id);
    if (codec == ptwm::Codec::raw) {
        if (stored == length) put_u64(f + 24, XXH3_64bits(s.data() + offset, stored));
        return;
    }
    if (codec != ptwm::Codec::zstd) return;
    const unsigned long long bound = ZSTD_decompressBound(s.data() + offset, stored);
    if (bound == ZSTD_CONTENTSIZE_ERROR || bound < length) return;  // cannot decode to `length`
    std::vector<uint8_t> decoded(length);
    try {
        ptwm::decode_plane(codec, {s.data() + offset, stored}, decoded);
    } catch (const ptwm::CorruptData&) {
        return;  // undecodable: the reader must say so
    }
    put_u64(f + 24, XXH3_64bits(decoded.data(), decoded.size()));
}

void fix_checksums(std::vector<uint8_t>& s) {
    if (s.size() < ptwm::kSuperblockBytes) return;
    fix_section(s, kPrefixSectionAt, s[kPrefixCodecAt]);
    fix_section(s, kIndexSectionAt, s[kIndexCodecAt]);
    put_u64(s.data() + kSuperChecksumAt, XXH3_64bits(s.data(), kSuperChecksumAt));
}

// One memfd for the process; each input replaces its contents.
const std::string& store_path(int& fd) {
    static int memfd = [] {
        const int f = memfd_create("ptwm-fuzz-store", MFD_CLOEXEC);
        if (f < 0) std::abort();
        return f;
    }();
    static const std::string path = "/proc/self/fd/" + std::to_string(memfd);
    fd = memfd;
    return path;
}

// splitmix64: the read ranges are a function of the input, so a crash
// replays exactly.
uint64_t next_random(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<uint8_t> store(data, data + size);
    fix_checksums(store);
    int fd = -1;
    const std::string& path = store_path(fd);
    if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, store.data(), size, 0) != static_cast<ssize_t>(size))) std::abort();

    std::unique_ptr<ptwm::StoreReader> reader;
    try {
        reader = ptwm::StoreReader::open(path);
    } catch (const ptwm::Error&) {
        return 0;  // rejected at open: the usual outcome
    }

    // Every chunk, whole. A damaged one must fail alone (CorruptData).
    std::vector<uint8_t> out;
    for (size_t i = 0; i < reader->chunk_count(); ++i) {
        out.resize(reader->chunk(i).original_length);
        try {
            reader->decode_chunk(i, out);
        } catch (const ptwm::CorruptData&) {
        }
    }

    // Random ranges through read(), which maps offsets to chunks and cuts
    // partial chunks: the prefix/data boundary and chunk edges are where
    // offset arithmetic goes wrong. Plus the last byte and the whole prefix
    // with the first data byte after it. (Not the whole file from 0, as
    // before: that decoded every chunk a second time, after the loop above
    // had, and was a third of this target's time.)
    const uint64_t total = reader->original_size();
    if (total == 0) return 0;
    uint64_t state = XXH3_64bits(data, size);
    std::vector<std::pair<uint64_t, uint64_t>> ranges = {
        {total - 1, 1}, {0, std::min<uint64_t>(total, reader->prefix().size() + 1)}};
    for (int k = 0; k < 8; ++k) {
        const uint64_t at = next_random(state) % total;
        ranges.emplace_back(at, 1 + next_random(state) % std::min(total - at, kMaxReadBytes));
    }
    for (const auto& [at, n] : ranges) {
        out.resize(n);
        try {
            reader->read(at, out);
        } catch (const ptwm::CorruptData&) {
        }
    }
    return 0;
}
