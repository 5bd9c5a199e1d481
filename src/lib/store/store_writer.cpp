#include "ptwm/store/store_writer.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "ptwm/base/cancellation.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/base/file_io.hpp"
#include "ptwm/base/parallel.hpp"
#include "ptwm/planes/fp4_groups.hpp"
#include "ptwm/store/chunk_codec.hpp"
#include "ptwm/store/chunk_index.hpp"
#include "ptwm/store/safetensors.hpp"
#include "ptwm/store/scale_pairs.hpp"
#include "ptwm/store/store_format.hpp"
#include "base/bulk_buffer.hpp"
#include "base/serial_worker.hpp"
#include "base/worker_pool.hpp"

namespace ptwm {
namespace {

// How much of a tensor the decomposition choice looks at. Order-0 statistics
// settle long before: every corpus tensor gets the same decomposition from
// 32 KiB as from 256 KiB (at 16 KiB one posenet FP8 tensor flips).
constexpr size_t kChooseSampleBytes = 32u << 10;
// A batch (one read, one write, encoded in parallel) holds at least this
// many chunks and bytes per thread: enough to keep every thread busy, and
// few enough hand-offs to the I/O thread where tensors are small (each costs
// a wake-up on another core: batches of 4 chunks made the I/O thread a loss
// on the corpus's FP8 and FP4 files, hundreds of tensors of a few KiB).
constexpr size_t kChunksPerThread = 4;
constexpr uint64_t kBatchBytesPerThread = 1u << 20;
constexpr size_t kMaxChunksPerThread = 256;
// The first batch's read has nothing to overlap with: the encoders wait for
// it. So batches start at this many bytes a thread and double up to
// kBatchBytesPerThread (a whole 1 MiB first batch was a tenth of posenet
// FP8's 6 ms pack: page faults and the copy from the page cache).
constexpr uint64_t kFirstBatchBytesPerThread = 64u << 10;

// FP4 tensors code their blocks as one fp4-tables stream (decompositions
// 13, 14), not as one rANS plane per scale group (10, 11, which stores of
// earlier writers hold): every group plane paid htscodecs' states and table
// (some 40 bytes a 4-state plane, 130 a 32-state one), which on the corpus's
// FP4 files (tensors of 1-110 KiB) cost as much as the grouping saved, and
// the stream decodes faster than the planes and their merge.
// Every chunk of a tensor with block scales takes them: the writer no
// longer picks among the stream, the nibble and sign / magnitude splits and
// the scale groups by their planes' order-0 bounds on a sample, which
// cannot see fp4-tables' table costs (posenet MXFP4 came out 0.47% larger
// for it) and took a tenth of an FP4 file's pack time. Small chunks, where
// a stream (constant blocks, repeated rows) can code smaller, get both
// (see encode_chunk).

Decomposition tabled(Decomposition grouped) {
    if (grouped == Decomposition::fp4_mx_grouped) return Decomposition::fp4_mx_tabled;
    if (grouped == Decomposition::fp4_nv_grouped) return Decomposition::fp4_nv_tabled;
    return grouped;
}

// Puts the payloads of a batch's chunks (plan[first ...], `encoded`) back to
// back at the start of `buffer`, `total` bytes in all, and returns them. A
// chunk whose payload vector is empty has its payload (entry.stored_length()
// bytes) in its own place in `buffer`, at the chunk's offset in the batch.
std::span<uint8_t> gather_payloads(BulkBuffer& buffer, std::span<const PlannedChunk> plan, size_t first,
                                   std::vector<EncodedChunk>& encoded, uint64_t total) {
    const uint64_t begin = plan[first].offset;
    const auto size = [&](size_t i) { return encoded[i].entry.stored_length(); };
    // In place, front to back, as long as no payload reaches the place of
    // a later chunk's before that one has moved: the payloads so far no
    // larger than their chunks. Otherwise (data that grew) through a copy.
    bool in_place = true;
    for (size_t i = 0, at = 0; i < encoded.size() && in_place; ++i) {
        const PlannedChunk& c = plan[first + i];
        at += size(i);
        in_place = at <= c.offset + c.length - begin;
    }
    std::vector<uint8_t> grown;
    if (!in_place) grown.reserve(total);
    uint8_t* const base = buffer.get(in_place ? total : 0).data();
    for (size_t i = 0, at = 0; i < encoded.size(); ++i) {
        const uint8_t* from = encoded[i].payload.empty() ? base + (plan[first + i].offset - begin) : encoded[i].payload.data();
        if (in_place) std::memmove(base + at, from, size(i));
        else grown.insert(grown.end(), from, from + size(i));
        at += size(i);
        std::vector<uint8_t>().swap(encoded[i].payload);
    }
    if (in_place) return {base, total};
    const std::span<uint8_t> stored = buffer.get(total);
    std::copy(grown.begin(), grown.end(), stored.begin());
    return stored;
}

}  // namespace

std::vector<uint8_t> planned_chunk_scales(const SafetensorsHeader& h, const PlannedChunk& c, const SourceReader& read) {
    if (!is_grouped(c.decomposition)) return {};
    const unsigned bb = block_bytes(c.decomposition);
    std::vector<uint8_t> scales(c.length / bb);
    read(h.tensors[c.scale_tensor].begin + (c.offset - h.tensors[c.tensor].begin) / bb, scales);
    return scales;
}

std::vector<PlannedChunk> plan_chunks(const SafetensorsHeader& h, uint32_t chunk_bytes, const SourceReader& read) {
    std::vector<PlannedChunk> plan;
    std::vector<uint8_t> sample;
    // Each tensor's scale pair, found once; the scale tensors of FP4 pairs
    // (a pair's scales may come before its blocks) may try the scale coders.
    const std::vector<std::optional<ScalePair>> pairs = find_scale_pairs(h);
    std::vector<bool> is_scales(h.tensors.size());
    for (const auto& pair : pairs)
        if (pair) is_scales[pair->scale_tensor] = true;
    for (uint32_t t = 0; t < h.tensors.size(); ++t) {
        const TensorInfo& info = h.tensors[t];
        if (info.size() == 0) continue;
        const std::vector<Decomposition> candidates = viable_candidates(dtype_info(info.dtype).candidates);
        const auto& pair = pairs[t];
        Decomposition d = candidates.front();
        if (pair) {
            d = tabled(pair->decomposition);
        } else if (candidates.size() > 1) {
            sample.resize(std::min<uint64_t>(info.size(), kChooseSampleBytes));
            read(info.begin, sample);
            d = choose_decomposition(candidates, sample);
        }
        const uint32_t unit = element_bytes(d);
        const uint32_t step = std::max(unit, chunk_bytes - chunk_bytes % unit);
        for (uint64_t at = info.begin; at < info.end; at += step) {
            const auto len = static_cast<uint32_t>(std::min<uint64_t>(step, info.end - at));
            // A tensor whose size is not a multiple of the element width (not
            // valid safetensors, but harmless) keeps its tail as a stream.
            const Decomposition chunk_d = len % unit == 0 ? d : Decomposition::stream;
            plan.push_back({at, len, t, chunk_d, is_grouped(chunk_d) ? pair->scale_tensor : kNoTensor, is_scales[t]});
        }
    }
    return plan;
}

PackResult pack_file(const std::string& src, const std::string& dst, const PackOptions& opt) {
    return pack_file(src, read_safetensors_header(src), dst, opt);
}

PackResult pack_file(const std::string& src, const SafetensorsHeader& header, const std::string& dst,
                     const PackOptions& opt) {
    const File in = File::open_read(src);
    const uint64_t original_size = in.size();
    const SourceReader read = [&](uint64_t offset, std::span<uint8_t> out) { in.read_exact(offset, out); };
    const std::vector<PlannedChunk> plan = plan_chunks(header, opt.chunk_bytes, read);
    const unsigned threads = thread_count(opt.threads);

    // The store is readable by whom the original was (less the umask).
    struct stat st {};
    if (::fstat(in.fd(), &st) != 0) throw_errno(src, "cannot stat");
    AtomicOutput out(dst, st.st_mode & 0666, opt.durability);
    out.keep_modification_time(st);
    Superblock sb;
    sb.original_size = original_size;
    sb.prefix.offset = kSuperblockBytes;
    uint64_t stored_at = 0;  // where the next chunk goes: placed after the prefix

    std::vector<uint8_t> index(plan.size() * kChunkEntryBytes);
    // Batches alternate between two buffers: while the encoders work on one,
    // the I/O thread writes the batch before it and reads the batch after it
    // into the other. Its jobs run in order, so the read of batch k + 1 is
    // done only once the write of batch k - 1 (the same buffers) is.
    // A batch's buffer holds its bytes read, then, once they are encoded,
    // its payloads back to back, which one write stores (chunks are stored
    // in order). A payload no larger than its chunk takes the chunk's place
    // in the buffer as soon as it is coded (the chunk's bytes are done
    // with), and its vector goes back to the allocator for the next
    // chunk's (an emptied vector says where the payload is); the rest stay
    // in their vectors until the batch is gathered.
    // Kept until their batch's write, the payloads were fresh memory batch
    // after batch, page faults all (half of esrgan MXFP4's 1663), and a
    // write a chunk was 465 writes. (With the buffers below: 624 page
    // faults, 4-6 ms less CPU of 31, -16%; placing the payloads as they
    // come, rather than all at the batch's end: 416, and 0.7-1.2 ms less.)
    struct Batch {
        size_t first = 0, count = 0;
        uint64_t begin = 0, end = 0;
        BulkBuffer buffer;
        std::span<uint8_t> input;
        std::vector<EncodedChunk> encoded;
    };
    std::array<Batch, 2> batches;
    std::vector<size_t> batch_start;  // the first chunk of each batch
    for (uint64_t i = 0, target = kFirstBatchBytesPerThread; i < plan.size();
         target = std::min(2 * target, kBatchBytesPerThread)) {
        batch_start.push_back(i);
        uint64_t bytes = 0;
        size_t count = 0;
        while (i < plan.size() && count < threads * kMaxChunksPerThread &&
               (count < threads * kChunksPerThread || bytes < threads * target))
            bytes += plan[i++].length, ++count;
    }
    const size_t batch_count = batch_start.size();
    batch_start.push_back(plan.size());
    // Both buffers at the largest batch's size from the start: grown batch
    // by batch (they double up to kBatchBytesPerThread), each growth was
    // fresh memory to fault in again.
    uint64_t largest_batch = 0;
    for (size_t k = 0; k < batch_count; ++k) {
        const PlannedChunk& last = plan[batch_start[k + 1] - 1];
        largest_batch = std::max(largest_batch, last.offset + last.length - plan[batch_start[k]].offset);
    }
    for (Batch& b : batches) b.buffer.get(largest_batch);
    WorkerPool encoders(threads);
    SerialWorker io;  // after everything its jobs use: stopped before they go
    const auto queue_read = [&](size_t k) {
        Batch& b = batches[k % 2];
        b.first = batch_start[k];
        b.count = batch_start[k + 1] - b.first;
        // Chunks tile the data section, so a batch is one contiguous read.
        b.begin = plan[b.first].offset;
        b.end = plan[b.first + b.count - 1].offset + plan[b.first + b.count - 1].length;
        return io.submit([&b, &in] {
            b.input = b.buffer.get(b.end - b.begin);
            in.read_exact(b.begin, b.input);
        });
    };
    uint64_t read_ticket = batch_count ? queue_read(0) : 0;
    // The prefix (the safetensors header, zstd-coded) on the I/O thread
    // too, while the first batch encodes (0.2 ms of posenet FP8's 6 ms pack
    // the encoders waited for): its stored length places the first chunk.
    const uint64_t prefix_ticket = io.submit([&] { out.write_at(sb.prefix.offset, encode_section(header.prefix, sb.prefix)); });
    const auto after_prefix = [&] {
        io.wait(prefix_ticket);
        return sb.prefix.offset + sb.prefix.stored_length;
    };
    for (size_t k = 0; k < batch_count; ++k) {
        Batch& b = batches[k % 2];
        io.wait(read_ticket);
        throw_if_cancelled();
        if (k + 1 < batch_count) read_ticket = queue_read(k + 1);
        b.encoded.assign(b.count, {});
        encoders.run(b.count, [&](size_t i) {
            const PlannedChunk& c = plan[b.first + i];
            try {
                const auto scales = planned_chunk_scales(header, c, read);
                const std::span<uint8_t> place = b.input.subspan(c.offset - b.begin, c.length);
                b.encoded[i] = encode_chunk(place, c.decomposition, opt.encode, scales,
                                            tensor_layout(header.tensors[c.tensor], c.offset, c.block_scales));
                std::vector<uint8_t>& payload = b.encoded[i].payload;
                if (payload.size() <= place.size()) {
                    std::copy(payload.begin(), payload.end(), place.begin());
                    std::vector<uint8_t>().swap(payload);  // (clear() would keep its memory)
                }
            } catch (const Error& e) {
                throw Error(src + ": tensor '" + header.tensors[c.tensor].name + "' at offset " + std::to_string(c.offset) +
                            ": " + e.what());
            }
        });
        if (k == 0) stored_at = after_prefix();
        const uint64_t batch_stored_at = stored_at;
        for (size_t i = 0; i < b.count; ++i) {
            ChunkEntry& e = b.encoded[i].entry;
            e.original_offset = plan[b.first + i].offset;
            e.tensor = plan[b.first + i].tensor;
            // (A small FP4 chunk may have come out as a stream: no scales.)
            e.scale_tensor = is_grouped(e.decomposition) ? plan[b.first + i].scale_tensor : kNoTensor;
            e.stored_offset = stored_at;
            stored_at += e.stored_length();
            encode_chunk_entry(e, std::span<uint8_t, kChunkEntryBytes>(index.data() + (b.first + i) * kChunkEntryBytes,
                                                                        kChunkEntryBytes));
        }
        const std::span<uint8_t> stored = gather_payloads(b.buffer, plan, b.first, b.encoded, stored_at - batch_stored_at);
        // (It takes only the span: the next queue_read rewrites this
        // batch's other members while the write may still run.)
        io.submit([stored, batch_stored_at, &out] { out.write_at(batch_stored_at, stored); });
        if (opt.progress) opt.progress(b.end, original_size);
    }
    io.wait_all();
    if (batch_count == 0) stored_at = after_prefix();

    sb.chunk_count = plan.size();
    sb.index.offset = stored_at;
    out.write_at(sb.index.offset, encode_section(index, sb.index));
    std::array<uint8_t, kSuperblockBytes> super{};
    encode_superblock(sb, super);
    out.write_at(0, super);
    // Checked as a reader checks it on open, on what the writer holds:
    // what a reader would refuse fails the pack, with DST untouched, not
    // every later open of the store (pairs chained by name once packed
    // stores no reader opened).
    check_chunk_index(index, sb, header, src + ": the store written would not open, a bug in ptwmfs (please report it)");
    out.commit();
    return {original_size, sb.index.offset + sb.index.stored_length, plan.size(), batch_count};
}

}  // namespace ptwm
