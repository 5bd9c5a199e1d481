#include "store_file.hpp"

#include <malloc.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "index_cache.hpp"
#include "log.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/remote/http_client.hpp"

namespace ptwmfs {

void GatheredRead::clear() {
    pieces.clear();
    held.clear();
    scratch_used = 0;
    prefix_bytes = 0;
    raw_bytes = 0;
}

StoreFile::StoreFile(uint64_t id, std::string name, uint64_t original_size, SourceOpener open_source)
    : id_(id), name_(std::move(name)), original_size_(original_size), open_source_(std::move(open_source)) {}

StoreFile::StoreFile(uint64_t id, std::shared_ptr<const ptwm::ByteSource> source, uint64_t original_size)
    : id_(id), name_(source->name()), original_size_(original_size), source_(std::move(source)) {}

LoadedStorePtr StoreFile::load(IndexCache& indexes) const {
    if (LoadedStorePtr loaded = loaded_now()) {
        indexes.touched(*this);
        return loaded;
    }
    // Concurrent first readers wait for one attempt and share its outcome.
    return loading_.run([&] { return load_now(indexes); });
}

LoadedStorePtr StoreFile::loaded_now() const {
    std::lock_guard lock(loaded_mutex_);
    return loaded_;
}

LoadedStorePtr StoreFile::load_now(IndexCache& indexes) const {
    if (LoadedStorePtr loaded = loaded_now()) {  // loaded by the attempt before this one
        indexes.touched(*this);
        return loaded;
    }
    if (failed_) throw ptwm::Error(load_error_);
    const auto start = std::chrono::steady_clock::now();
    LoadedStorePtr loaded;
    try {
        loaded = open_loaded();
    } catch (const std::exception& e) {
        indexes.load_failed();
        // A request that failed (the network, or the server's answer) is
        // tried again by the next read; what the store's bytes say (not a
        // store, damaged) stays, and so does a change on the server (the
        // object, or its tree, replaced since the mount: logged once where
        // it was found, and no later attempt would find the old one).
        if (dynamic_cast<const ptwm::remote::ObjectChanged*>(&e) != nullptr) {
            failed_ = true;
            load_error_ = e.what();
            throw;
        }
        if (dynamic_cast<const ptwm::remote::RemoteError*>(&e) != nullptr) {
            log_error("%s: cannot load its index, the read fails with EIO and the next tries again: %s", name_.c_str(),
                      e.what());
            throw;
        }
        failed_ = true;
        load_error_ = e.what();
        log_error("%s: not a usable store: %s; reads of it fail with EIO", name_.c_str(), e.what());
        throw ptwm::Error(load_error_);
    }
    {
        std::lock_guard lock(loaded_mutex_);
        loaded_ = loaded;
    }
    // Parsing the header's JSON leaves megabytes of small freed blocks in
    // this thread's malloc arena, which glibc keeps resident: a load in a
    // FUSE thread then costs twice what it holds (the daemon serving the
    // two 2 GB shards of a 4.3 GB checkpoint was at 141 MiB resident
    // after reading them without this trim, 79 MiB with it).
    malloc_trim(0);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    indexes.added(*this, loaded->memory_bytes,
                  static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()));
    return loaded;
}

LoadedStorePtr StoreFile::open_loaded() const {
    if (!source_) source_ = open_source_();
    auto loaded = std::make_shared<LoadedStore>();
    loaded->reader = reading_anew_on_failure(*source_, [&] { return ptwm::StoreReader::open_shared(source_); });
    if (loaded->reader->original_size() != original_size_)
        throw ptwm::Error(name_ + ": changed since it was opened: the mount shows " + std::to_string(original_size_) +
                          " bytes (from its superblock or the manifest at mount), the store now holds a file of " +
                          std::to_string(loaded->reader->original_size()));
    const size_t chunks = loaded->reader->chunk_count();
    const size_t words = (chunks + 63) / 64;
    loaded->raw_verified = std::make_unique<std::atomic<uint64_t>[]>(words);
    loaded->memory_bytes = sizeof(LoadedStore) + loaded->reader->memory_bytes() + words * sizeof(uint64_t);
    return loaded;
}

LoadedStorePtr StoreFile::drop_if_unused() const {
    std::lock_guard lock(loaded_mutex_);
    // Only copies taken under this lock add owners, so none can appear
    // between the count and the reset.
    if (!loaded_ || loaded_.use_count() > 1) return nullptr;
    return std::move(loaded_);
}

std::pair<size_t, size_t> StoreFile::chunks_covering(const LoadedStore& loaded, uint64_t begin, uint64_t end) {
    const ptwm::StoreReader& reader = *loaded.reader;
    begin = std::max<uint64_t>(begin, reader.prefix().size());
    end = std::min(end, reader.original_size());
    if (begin >= end) return {0, 0};
    return {reader.find_chunk(begin), reader.find_chunk(end - 1) + 1};
}

void StoreFile::gather(const LoadedStore& loaded, uint64_t offset, uint64_t length, ptwm::ChunkCache& cache,
                       GatheredRead& out) const {
    const ptwm::StoreReader& reader = *loaded.reader;
    const uint64_t end = std::min(offset + length, size());
    if (offset >= end) return;
    // Sized once, before any piece points into it.
    if (out.scratch.size() < end - offset) out.scratch.resize(end - offset);

    uint64_t pos = offset;
    const auto prefix = reader.prefix();
    if (pos < prefix.size()) {
        const uint64_t n = std::min<uint64_t>(end, prefix.size()) - pos;
        out.pieces.push_back({const_cast<uint8_t*>(prefix.data() + pos), n});
        out.prefix_bytes += n;
        pos += n;
    }
    while (pos < end) {
        const size_t index = reader.find_chunk(pos);
        const uint64_t chunk_offset = reader.index().original_offset(index);
        const uint32_t chunk_length = reader.index().original_length(index);
        const uint64_t piece_end = std::min(end, chunk_offset + chunk_length);
        if (reader.chunk_is_raw(index)) {
            gather_raw(loaded, index, pos, piece_end, out);
        } else {
            ptwm::ChunkPtr data = cache.get({id_, index}, chunk_length,
                                            [&](std::span<uint8_t> bytes) { decode(loaded, index, bytes, &cache); });
            out.pieces.push_back({const_cast<uint8_t*>(data->bytes().data() + (pos - chunk_offset)), piece_end - pos});
            out.held.push_back(std::move(data));
        }
        pos = piece_end;
    }
}

void StoreFile::gather_raw(const LoadedStore& loaded, size_t index, uint64_t begin, uint64_t end,
                           GatheredRead& out) const {
    const ptwm::StoreReader& reader = *loaded.reader;
    const ptwm::ChunkEntry chunk = reader.chunk(index);
    const uint64_t within = begin - chunk.original_offset;
    const uint64_t n = end - begin;
    out.raw_bytes += n;

    if (!loaded.raw_chunk_verified(index)) {
        // Concurrent first readers may both verify: harmless and rare.
        auto data = std::make_shared<ptwm::ChunkData>(chunk.original_length);
        decode(loaded, index, data->writable_bytes(), nullptr);
        loaded.set_raw_chunk_verified(index);
        out.pieces.push_back({data->writable_bytes().data() + within, n});
        out.held.push_back(std::move(data));
        return;
    }

    uint8_t* dest = out.scratch.data() + out.scratch_used;
    out.scratch_used += n;
    // Through the reader's source, so the mount's page-cache policy holds
    // for raw chunks too.
    const ptwm::ByteSource& source = reader.source();
    if (source.read_up_to(chunk.stored_offset + within, {dest, n}) < n)
        throw ptwm::Error(reader.path() + ": store ends inside " + reader.describe_chunk(index));
    out.pieces.push_back({dest, n});
}

void StoreFile::prefetch(const LoadedStore& loaded, size_t index, ptwm::ChunkCache& cache) const {
    const ptwm::StoreReader& reader = *loaded.reader;
    // Checked first so a chunk a reader already fetched does not count as a hit.
    if (reader.chunk_is_raw(index) || cache.contains({id_, index})) return;
    try {
        cache.get({id_, index}, reader.index().original_length(index),
                  [&](std::span<uint8_t> bytes) { decode(loaded, index, bytes, &cache); });
        if (prefetch_failing_.load(std::memory_order_relaxed)) prefetch_failing_.store(false, std::memory_order_relaxed);
    } catch (const ptwm::CorruptData&) {
        // Already reported; the reader that reaches it gets EIO.
    } catch (const ptwm::remote::ObjectChanged&) {
        // Logged once for the object by the remote stage; readers get EIO.
    } catch (const std::exception& e) {
        if (!prefetch_failing_.exchange(true, std::memory_order_relaxed))
            log_error("%s: decoding ahead: %s (its next failures are not logged until it works again; reads that "
                      "reach the range fail with EIO)", name_.c_str(), e.what());
    }
}

namespace {

// What each decoding thread keeps of its decode buffers between chunks
// (StoreReader::release_thread_buffers): chunks of up to 1 MiB (the default
// is 256 KiB) decode without allocating, and larger ones allocate and free
// their buffers each time. Unreleased, FUSE threads and decode-ahead
// workers each kept some 2.3 times the largest chunk they ever decoded: a
// mount of 16 MiB chunks read by 8 readers stayed at 305 MiB resident with
// a 16 MiB cache (55 MiB with this).
constexpr size_t kKeptDecodeBufferBytes = 1u << 20;

// Decodes running on this thread: a grouped chunk's decode gets its scale
// chunk through the cache, a decode nested in it. The buffers are released
// after the outermost one only (the outer decode is still using some).
thread_local unsigned t_decode_depth = 0;

}  // namespace

void StoreFile::decode(const LoadedStore& loaded, size_t index, std::span<uint8_t> out, ptwm::ChunkCache* cache) const {
    struct Depth {
        Depth() { ++t_decode_depth; }
        ~Depth() {
            if (--t_decode_depth == 0) ptwm::StoreReader::release_thread_buffers(kKeptDecodeBufferBytes);
        }
    } depth;
    // (A scale chunk is never grouped: its own decode fetches nothing.)
    const auto scale_chunk = [&](size_t j) {
        return cache->get({id_, j}, loaded.reader->index().original_length(j),
                          [&](std::span<uint8_t> bytes) { decode(loaded, j, bytes, nullptr); });
    };
    try {
        loaded.reader->decode_chunk(index, out,
                                    cache ? ptwm::StoreReader::ScaleChunkFetch(scale_chunk) : ptwm::StoreReader::ScaleChunkFetch());
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
