#include "ptwm/store/store_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "ptwm/base/error.hpp"
#include "ptwm/base/file_io.hpp"
#include "ptwm/planes/fp4_groups.hpp"
#include "ptwm/store/chunk_codec.hpp"

namespace ptwm {
namespace {

thread_local std::vector<uint8_t> t_payload;  // a chunk's stored bytes, reused per thread
thread_local std::vector<uint8_t> t_partial;  // a chunk decoded for a read that covers part of it
thread_local std::vector<uint8_t> t_scales;   // the block scales a grouped chunk decodes with

// The scale tensor's chunk this thread decoded last, kept for the grouped
// chunks after it: a 256 KiB chunk of MXFP4 blocks takes 16 KiB of scales,
// so the blocks chunks of a large tensor (gpt-oss's experts) each decoded a
// whole scale chunk for a sixteenth of it -- on a [2880, 5760] MXFP4
// tensor, 16 times its scales' decoding, four fifths of its read time.
// Keyed by the reader's serial number (an address can be reused by the next
// reader) and the chunk; unkeyed while a decode into it is under way.
struct ScaleChunkMemo {
    uint64_t reader = 0;  // 0: holds nothing
    size_t chunk = 0;
    std::vector<uint8_t> bytes;
};
thread_local ScaleChunkMemo t_scale_chunk;
std::atomic<uint64_t> g_next_reader_serial{1};

}  // namespace

void StoreReader::release_thread_buffers(size_t keep_bytes) {
    for (std::vector<uint8_t>* buffer : {&t_payload, &t_partial, &t_scales, &t_scale_chunk.bytes}) {
        if (buffer->capacity() <= keep_bytes) continue;
        if (buffer == &t_scale_chunk.bytes) t_scale_chunk.reader = 0;  // holds nothing now
        std::vector<uint8_t>().swap(*buffer);
    }
    release_plane_buffers(keep_bytes);
}

std::unique_ptr<StoreReader> StoreReader::open(const std::string& path) {
    return open(LocalFileSource::open(path));
}

std::unique_ptr<StoreReader> StoreReader::open(std::unique_ptr<ByteSource> source) {
    return open_shared(std::move(source));
}

Superblock StoreReader::read_superblock(const ByteSource& f) {
    const std::string& path = f.name();
    const uint64_t file_size = f.size();
    if (file_size < kSuperblockBytes)
        throw Error(path + ": not a ptwmfs store: " + std::to_string(file_size) + " bytes, shorter than a superblock");
    std::array<uint8_t, kSuperblockBytes> super;
    f.read_exact(0, super);
    const Superblock sb = decode_superblock(super, path);
    for (auto [section, name] : {std::pair{&sb.prefix, "safetensors header"}, std::pair{&sb.index, "chunk index"}}) {
        if (section->offset < kSuperblockBytes || section->offset > file_size ||
            section->stored_length > file_size - section->offset)
            throw Error(path + ": truncated or damaged: the " + name + " (" + std::to_string(section->stored_length) +
                        " bytes at offset " + std::to_string(section->offset) + ") lies outside the store (" +
                        std::to_string(file_size) + " bytes)");
    }
    // Bounds before allocating what the superblock claims.
    if (sb.prefix.length < 8 || sb.prefix.length > 8 + kMaxHeaderBytes || sb.prefix.length > sb.original_size)
        throw Error(path + ": damaged: the safetensors header length " + std::to_string(sb.prefix.length) +
                    " is out of bounds");
    // Every chunk stores at least one byte, so there cannot be more chunks than store bytes.
    if (sb.chunk_count > file_size || sb.index.length != sb.chunk_count * kChunkEntryBytes)
        throw Error(path + ": damaged: the index claims " + std::to_string(sb.chunk_count) + " chunks in " +
                    std::to_string(sb.index.length) + " bytes");
    return sb;
}

std::unique_ptr<StoreReader> StoreReader::open_shared(std::shared_ptr<const ByteSource> source) {
    std::unique_ptr<StoreReader> r(new StoreReader());
    r->serial_ = g_next_reader_serial.fetch_add(1, std::memory_order_relaxed);
    const ByteSource& f = *source;
    const std::string& path = f.name();
    r->path_ = path;
    r->file_size_ = f.size();
    r->sb_ = read_superblock(f);
    const Superblock& sb = r->sb_;

    auto read_section = [&](const Section& section, const char* name) {
        std::vector<uint8_t> stored(section.stored_length);
        f.read_exact(section.offset, stored);
        return decode_section(stored, section, path, name);
    };
    // Parsed to validate it and build the tensor table, then let go but for
    // its bytes: the parse holds several times the table (names, JSON
    // metadata). It takes the decoded bytes rather than copying them.
    SafetensorsHeader header =
        parse_safetensors(read_section(sb.prefix, "safetensors header"), sb.original_size, path + " (stored header)");
    if (header.prefix.size() != sb.prefix.length)
        throw Error(path + ": damaged: the stored safetensors header is " + std::to_string(sb.prefix.length) +
                    " bytes but its length field makes it " + std::to_string(header.prefix.size()));
    const std::vector<uint8_t> index = read_section(sb.index, "chunk index");

    r->chunks_.reserve(sb.chunk_count);
    check_chunk_index(index, sb, header, path, [&](const ChunkEntry& e) { r->chunks_.push_back(e); });
    r->chunks_.finish();
    r->tensors_ = TensorTable(header, sb.original_size);
    r->prefix_bytes_ = std::move(header.prefix);
    r->prefix_bytes_.shrink_to_fit();
    r->prefix_ = r->prefix_bytes_;
    r->source_ = std::move(source);
    return r;
}

StoreReader::~StoreReader() = default;

size_t StoreReader::find_chunk(uint64_t offset) const { return chunks_.find(offset); }

bool StoreReader::chunk_is_raw(size_t i) const { return chunks_.is_raw(i); }

const SafetensorsHeader& StoreReader::header() const {
    if (const SafetensorsHeader* ready = header_ready_.load(std::memory_order_acquire)) return *ready;
    std::lock_guard lock(header_mutex_);
    if (!header_) {
        // The parse takes the bytes prefix() points into. Allocated first:
        // nothing may throw once it has them, or they would be freed under
        // prefix(). If the parse throws, prefix_bytes_ still holds them, and
        // the next call tries again.
        auto header = std::make_unique<SafetensorsHeader>();
        *header = parse_safetensors(std::move(prefix_bytes_), sb_.original_size, path_);
        header_ = std::move(header);
        header_ready_.store(header_.get(), std::memory_order_release);
    }
    return *header_;
}

size_t StoreReader::memory_bytes() const {
    // Not counting a header() parse: the mount asks for one only to name
    // the tensor of a damaged chunk.
    // prefix_.size(): whichever vector holds the bytes, header() may be
    // moving them between the two on another thread.
    return sizeof(*this) + prefix_.size() + tensors_.memory_bytes() + chunks_.memory_bytes();
}

std::string StoreReader::describe_chunk(size_t i) const {
    const uint32_t t = chunks_.tensor(i);
    // Names are in the full header only: the first message about a damaged
    // chunk parses it, and the reader keeps it from then on.
    std::string tensor = "?";
    try {
        const SafetensorsHeader& h = header();
        if (t < h.tensors.size()) tensor = h.tensors[t].name;
    } catch (const std::exception&) {
        // It parsed when the store opened, so this cannot fail; "?" if it does.
    }
    return path_ + ", chunk " + std::to_string(i) + " (tensor '" + tensor + "', original offset " +
           std::to_string(chunks_.original_offset(i)) + ")";
}

void StoreReader::read_scales(size_t i, std::vector<uint8_t>& scales, const ScaleChunkFetch& fetch) const {
    const ChunkEntry e = chunk(i);
    const unsigned bb = block_bytes(e.decomposition);
    const uint64_t begin = tensors_.begin(e.scale_tensor) + (e.original_offset - tensors_.begin(e.tensor)) / bb;
    scales.resize(e.original_length / bb);
    // The scale tensor's chunks are never grouped (checked at open), so this
    // does not recurse; it uses its own buffer, not t_partial, which a
    // caller may be decoding into.
    ScaleChunkMemo& memo = t_scale_chunk;
    for (uint64_t at = begin; at < begin + scales.size();) {
        const size_t j = find_chunk(at);
        const ChunkEntry s = chunk(j);
        const uint8_t* bytes;
        ChunkPtr fetched;
        if (fetch) {
            fetched = fetch(j);
            if (fetched->bytes().size() != s.original_length)
                throw Error(describe_chunk(j) + ": the scale chunk fetched holds " + std::to_string(fetched->bytes().size()) +
                            " bytes where the index says " + std::to_string(s.original_length));
            bytes = fetched->bytes().data();
        } else {
            if (memo.reader != serial_ || memo.chunk != j) {
                memo.reader = 0;
                memo.bytes.resize(s.original_length);
                decode_chunk(j, memo.bytes);
                memo.reader = serial_, memo.chunk = j;
            }
            bytes = memo.bytes.data();
        }
        const uint64_t n = std::min<uint64_t>(s.original_offset + s.original_length, begin + scales.size()) - at;
        std::memcpy(scales.data() + (at - begin), bytes + (at - s.original_offset), n);
        at += n;
    }
}

TensorLayout StoreReader::chunk_layout(size_t i) const {
    const uint32_t t = chunks_.tensor(i);
    return {tensors_.shape(t), chunks_.original_offset(i) - tensors_.begin(t), tensors_.dtype(t), {}};
}

std::vector<uint8_t> StoreReader::chunk_scales(size_t i) const {
    std::vector<uint8_t> scales;
    if (is_grouped(chunks_.decomposition(i))) read_scales(i, scales, {});
    return scales;
}

void StoreReader::decode_chunk(size_t i, std::span<uint8_t> out, const ScaleChunkFetch& scales) const {
    const ChunkEntry e = chunk(i);
    // A scale chunk this thread decoded for the blocks before it (a file
    // holds X.blocks before X.scales): the read of the scales themselves
    // that follows takes it from the memo, not from a second decoding.
    if (const ScaleChunkMemo& memo = t_scale_chunk; memo.reader == serial_ && memo.chunk == i) {
        if (out.size() != memo.bytes.size()) throw Error(describe_chunk(i) + ": decoded into a buffer of the wrong size");
        std::memcpy(out.data(), memo.bytes.data(), out.size());
        return;
    }
    // Scales first: fetching them decodes other chunks through t_payload.
    // Damage there is this chunk's too: named as such, so that a reader
    // (verify, the daemon's log) lists each block chunk that is lost once,
    // beside the scale chunk's own report, not the scale chunk's N times.
    if (is_grouped(e.decomposition)) {
        try {
            read_scales(i, t_scales, scales);
        } catch (const CorruptData& err) {
            throw CorruptData(describe_chunk(i) + ": its block scales are damaged: " + err.what());
        }
    }
    t_payload.resize(e.stored_length());
    for (bool again = true;; again = false) {
        if (source_->read_up_to(e.stored_offset, t_payload) < t_payload.size())
            throw CorruptData(describe_chunk(i) + ": the store is truncated");
        try {
            decode_chunk_payload(e, t_payload, out,
                                 is_grouped(e.decomposition) ? std::span<const uint8_t>(t_scales) : std::span<const uint8_t>(),
                                 chunk_layout(i));
            return;
        } catch (const CorruptData& err) {
            // Fetched bytes a server sent wrong (and a disk cache kept) fail
            // every later read alike: a source that keeps copies drops them
            // and the chunk is read once more, from the server.
            if (again && source_->forget(e.stored_offset, e.stored_length())) continue;
            throw CorruptData(describe_chunk(i) + ": " + err.what());
        }
    }
}

void StoreReader::read(uint64_t offset, std::span<uint8_t> out) const {
    if (offset > original_size() || out.size() > original_size() - offset)
        throw Error(path_ + ": read of " + std::to_string(out.size()) + " bytes at " + std::to_string(offset) +
                    " runs past the original size " + std::to_string(original_size()));
    const uint64_t end = offset + out.size();
    const uint64_t prefix_end = prefix_.size();
    uint64_t at = offset;
    if (at < prefix_end) {
        const uint64_t n = std::min(end, prefix_end) - at;
        std::memcpy(out.data(), prefix_.data() + at, n);
        at += n;
    }
    while (at < end) {
        const size_t i = find_chunk(at);
        const ChunkEntry e = chunk(i);
        const uint64_t chunk_end = e.original_offset + e.original_length;
        const uint64_t n = std::min(end, chunk_end) - at;
        uint8_t* dst = out.data() + (at - offset);
        if (at == e.original_offset && n == e.original_length) {
            decode_chunk(i, {dst, n});
        } else {
            t_partial.resize(e.original_length);
            decode_chunk(i, t_partial);
            std::memcpy(dst, t_partial.data() + (at - e.original_offset), n);
        }
        at += n;
    }
}

}  // namespace ptwm
