// A growable buffer that is never zero-filled: for per-thread working
// memory on hot paths, where std::vector's value-initialisation of every
// new byte (and the page faults it takes) would cost as much as the work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace ptwm {

class Scratch {
public:
    // At least n bytes; the contents are unspecified.
    std::span<uint8_t> get(size_t n) {
        if (n > capacity_) {
            capacity_ = n + n / 4;
            data_.reset(new uint8_t[capacity_]);
        }
        return {data_.get(), n};
    }

private:
    std::unique_ptr<uint8_t[]> data_;
    size_t capacity_ = 0;
};

}  // namespace ptwm
