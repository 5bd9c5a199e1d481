// BulkBuffer: a large, long-lived byte buffer that is never zero-filled
// and, from 1 MiB, sits on transparent huge pages. For the store writer's
// batch buffers (the bytes read, the payloads written), reused batch after
// batch: each 4 KiB page of a fresh buffer costs a page fault (memcg charge,
// clear) on first touch, some 2-3 us each, where one 2 MiB huge page costs
// one fault and one clear. (Packing esrgan MXFP4, 3.9 MB, took 1663 page
// faults, a tenth of its CPU time; 475 of them were the zero-filling
// std::vector resize of its read buffers as their batches grew.)
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <span>

namespace ptwm {

class BulkBuffer {
public:
    BulkBuffer() = default;
    BulkBuffer(const BulkBuffer&) = delete;
    BulkBuffer& operator=(const BulkBuffer&) = delete;
    ~BulkBuffer() { release(); }

    // At least n bytes; the contents are unspecified (those of an earlier
    // get are kept only while n fits in the capacity).
    std::span<uint8_t> get(size_t n) {
        if (n > capacity_) {
            release();
            allocate(n);
        }
        return {data_, n};
    }

private:
    static constexpr size_t kHugePage = size_t{2} << 20;
    // Below this a huge page would clear more memory than the buffer's
    // faults cost: plain pages.
    static constexpr size_t kHugeFrom = size_t{1} << 20;

    void allocate(size_t n) {
        if (n >= kHugeFrom) {
            // A mapping of whole huge pages, aligned to one: mmap aligns only
            // to 4 KiB, so map a huge page more and keep the aligned part.
            const size_t size = (n + kHugePage - 1) / kHugePage * kHugePage;
            void* m = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED) throw std::bad_alloc();
            auto* base = static_cast<uint8_t*>(m);
            const size_t lead = (kHugePage - reinterpret_cast<uintptr_t>(base) % kHugePage) % kHugePage;
            if (lead) munmap(base, lead);
            munmap(base + lead + size, kHugePage - lead);
            data_ = base + lead;
            capacity_ = size;
            mapped_ = true;
            // Advice only: without huge pages (THP off) it is 4 KiB pages.
            madvise(data_, size, MADV_HUGEPAGE);
        } else {
            data_ = new uint8_t[n];
            capacity_ = n;
            mapped_ = false;
        }
    }

    void release() {
        if (!data_) return;
        if (mapped_) munmap(data_, capacity_);
        else delete[] data_;
        data_ = nullptr;
        capacity_ = 0;
    }

    uint8_t* data_ = nullptr;
    size_t capacity_ = 0;
    bool mapped_ = false;
};

}  // namespace ptwm
