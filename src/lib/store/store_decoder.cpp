#include "ptwm/store/store_decoder.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/scratch.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/base/parallel.hpp"

namespace ptwm {

void decode_all(const StoreReader& store, const DecodeAllOptions& opt,
                const std::function<void(uint64_t, std::span<const uint8_t>)>& sink) {
    sink(0, store.prefix());
    const unsigned threads = opt.threads ? opt.threads : default_threads();
    const uint64_t batch_bytes = opt.batch_bytes ? opt.batch_bytes : uint64_t{threads} << 20;
    Scratch buffer;  // reused across batches, never zero-filled
    const size_t n = store.chunk_count();
    for (size_t first = 0; first < n;) {
        // A batch: consecutive chunks up to batch_bytes (at least one).
        size_t last = first;
        uint64_t bytes = 0;
        while (last < n && (last == first || bytes + store.chunk(last).original_length <= batch_bytes))
            bytes += store.chunk(last++).original_length;
        const uint64_t base = store.chunk(first).original_offset;
        const std::span<uint8_t> batch = buffer.get(bytes);
        parallel_for(last - first, threads, [&](size_t k) {
            const size_t i = first + k;
            const ChunkEntry& e = store.chunk(i);
            const std::span<uint8_t> out = batch.subspan(e.original_offset - base, e.original_length);
            try {
                store.decode_chunk(i, out);
            } catch (const CorruptData& err) {
                if (!opt.on_damaged) throw;
                std::memset(out.data(), 0, out.size());
                opt.on_damaged(i, err.what());
            }
        });
        sink(base, batch);
        if (opt.progress) opt.progress(base + bytes, store.original_size());
        first = last;
    }
}

}  // namespace ptwm
