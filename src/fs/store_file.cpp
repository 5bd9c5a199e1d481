#include "store_file.hpp"

#include <algorithm>
#include <cerrno>

#include "log.hpp"
#include "ptwm/base/error.hpp"

namespace ptwmfs {

void GatheredRead::clear() {
    pieces.clear();
    held.clear();
    scratch_used = 0;
    prefix_bytes = 0;
    raw_bytes = 0;
}

StoreFile::StoreFile(uint64_t id, std::unique_ptr<ptwm::StoreReader> reader, UniqueFd raw_fd)
    : id_(id),
      reader_(std::move(reader)),
      raw_fd_(std::move(raw_fd)),
      raw_verified_(std::make_unique<std::atomic<bool>[]>(reader_->chunk_count())) {}

std::pair<size_t, size_t> StoreFile::chunks_covering(uint64_t begin, uint64_t end) const {
    begin = std::max<uint64_t>(begin, reader_->prefix().size());
    end = std::min(end, size());
    if (begin >= end) return {0, 0};
    return {reader_->find_chunk(begin), reader_->find_chunk(end - 1) + 1};
}

void StoreFile::gather(uint64_t offset, uint64_t length, ptwm::ChunkCache& cache, GatheredRead& out) const {
    const uint64_t end = std::min(offset + length, size());
    if (offset >= end) return;
    // Sized once, before any piece points into it.
    if (out.scratch.size() < end - offset) out.scratch.resize(end - offset);

    uint64_t pos = offset;
    const auto prefix = reader_->prefix();
    if (pos < prefix.size()) {
        const uint64_t n = std::min<uint64_t>(end, prefix.size()) - pos;
        out.pieces.push_back({const_cast<uint8_t*>(prefix.data() + pos), n});
        out.prefix_bytes += n;
        pos += n;
    }
    while (pos < end) {
        const size_t index = reader_->find_chunk(pos);
        const ptwm::ChunkEntry& chunk = reader_->chunk(index);
        const uint64_t piece_end = std::min(end, chunk.original_offset + chunk.original_length);
        if (reader_->chunk_is_raw(index)) {
            gather_raw(index, pos, piece_end, out);
        } else {
            ptwm::ChunkPtr data = cache.get({id_, index}, chunk.original_length,
                                            [&](std::span<uint8_t> bytes) { decode(index, bytes); });
            out.pieces.push_back(
                {const_cast<uint8_t*>(data->bytes().data() + (pos - chunk.original_offset)), piece_end - pos});
            out.held.push_back(std::move(data));
        }
        pos = piece_end;
    }
}

void StoreFile::gather_raw(size_t index, uint64_t begin, uint64_t end, GatheredRead& out) const {
    const ptwm::ChunkEntry& chunk = reader_->chunk(index);
    const uint64_t within = begin - chunk.original_offset;
    const uint64_t n = end - begin;
    out.raw_bytes += n;

    if (!raw_verified_[index].load(std::memory_order_relaxed)) {
        // Concurrent first readers may both verify: harmless and rare.
        auto data = std::make_shared<ptwm::ChunkData>(chunk.original_length);
        decode(index, data->writable_bytes());
        raw_verified_[index].store(true, std::memory_order_relaxed);
        out.pieces.push_back({data->writable_bytes().data() + within, n});
        out.held.push_back(std::move(data));
        return;
    }

    uint8_t* dest = out.scratch.data() + out.scratch_used;
    out.scratch_used += n;
    // Through the reader's source, so the mount's page-cache policy holds
    // for raw chunks too.
    const ptwm::ByteSource& source = reader_->source();
    if (source.read_up_to(chunk.stored_offset + within, {dest, n}) < n)
        throw ptwm::Error(reader_->path() + ": store ends inside " + reader_->describe_chunk(index));
    out.pieces.push_back({dest, n});
}

void StoreFile::prefetch(size_t index, ptwm::ChunkCache& cache) const {
    // Checked first so a chunk a reader already fetched does not count as a hit.
    if (reader_->chunk_is_raw(index) || cache.contains({id_, index})) return;
    const ptwm::ChunkEntry& chunk = reader_->chunk(index);
    try {
        cache.get({id_, index}, chunk.original_length, [&](std::span<uint8_t> bytes) { decode(index, bytes); });
    } catch (const ptwm::CorruptData&) {
        // Already reported; the reader that reaches it gets EIO.
    } catch (const std::exception& e) {
        log_error("%s: decoding ahead: %s", reader_->path().c_str(), e.what());
    }
}

void StoreFile::decode(size_t index, std::span<uint8_t> out) const {
    try {
        reader_->decode_chunk(index, out);
    } catch (const ptwm::CorruptData& e) {
        report_corruption(index, e);
        throw;
    }
}

void StoreFile::report_corruption(size_t index, const std::exception& e) const {
    {
        std::lock_guard lock(reported_mutex_);
        if (!reported_.insert(index).second) return;
    }
    // The library's message names file, chunk, tensor and offset (describe_chunk).
    log_error("corrupt data: %s; reads of it fail with EIO", e.what());
}

}  // namespace ptwmfs
