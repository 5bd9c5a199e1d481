#include "ptwm/store/store_decoder.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "base/scratch.hpp"
#include "base/serial_worker.hpp"
#include "base/worker_pool.hpp"
#include "ptwm/base/cancellation.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/base/parallel.hpp"

namespace ptwm {

void decode_all(const StoreReader& store, const DecodeAllOptions& opt,
                const std::function<void(uint64_t, std::span<const uint8_t>)>& sink) {
    const unsigned threads = thread_count(opt.threads);
    const uint64_t batch_bytes = opt.batch_bytes ? opt.batch_bytes : uint64_t{threads} << 20;
    // Two batch buffers, reused and never zero-filled: the sink takes batch
    // k on its own thread while batch k + 1 decodes into the other buffer,
    // which is taken again only once batch k - 1's sink call is done.
    std::array<Scratch, 2> buffers;
    std::array<uint64_t, 2> sunk{};  // per buffer, the ticket of its last sink call
    WorkerPool pool(threads);
    SerialWorker sink_thread;        // after what its jobs use: stopped before they go
    sink_thread.submit([&] { sink(0, store.prefix()); });  // every call from that thread, as documented
    const size_t n = store.chunk_count();
    for (size_t first = 0, k = 0; first < n; ++k) {
        // A batch: consecutive chunks up to batch_bytes (at least one).
        size_t last = first;
        uint64_t bytes = 0;
        while (last < n && (last == first || bytes + store.chunk(last).original_length <= batch_bytes))
            bytes += store.chunk(last++).original_length;
        const uint64_t base = store.chunk(first).original_offset;
        sink_thread.wait(sunk[k % 2]);
        throw_if_cancelled();
        const std::span<uint8_t> batch = buffers[k % 2].get(bytes);
        pool.run(last - first, [&](size_t i) {
            const size_t c = first + i;
            const ChunkEntry& e = store.chunk(c);
            const std::span<uint8_t> out = batch.subspan(e.original_offset - base, e.original_length);
            try {
                store.decode_chunk(c, out);
            } catch (const CorruptData& err) {
                if (!opt.on_damaged) throw;
                std::memset(out.data(), 0, out.size());
                opt.on_damaged(c, err.what());
            }
        });
        sunk[k % 2] = sink_thread.submit([&sink, base, batch] { sink(base, batch); });
        if (opt.progress) opt.progress(base + bytes, store.original_size());
        first = last;
    }
    sink_thread.wait_all();
}

}  // namespace ptwm
