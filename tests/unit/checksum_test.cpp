// ptwm::xxh3 runs XXH3 compiled for the CPU's widest vector unit; stores
// written on one machine are read on another, so it must equal the
// reference libxxhash value for every length (each length class takes its
// own code path inside XXH3: 0-16, 17-128, 129-240, then stripes and blocks).
#include <gtest/gtest.h>
#include <xxhash.h>

#include <random>
#include <vector>

#include "ptwm/base/checksum.hpp"

TEST(Checksum, EqualsLibxxhashForEveryLengthClass) {
    std::mt19937 rng(7);
    std::vector<uint8_t> bytes(300000);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    std::vector<size_t> lengths;
    for (size_t n = 0; n <= 1100; ++n) lengths.push_back(n);
    for (size_t n : {4095u, 4096u, 4097u, 65536u, 262143u, 262144u, 300000u}) lengths.push_back(n);
    for (size_t n : lengths) {
        for (size_t offset : {0u, 3u}) {
            if (offset + n > bytes.size()) continue;
            ASSERT_EQ(ptwm::xxh3(bytes.data() + offset, n), XXH3_64bits(bytes.data() + offset, n))
                << "length " << n << " at offset " << offset;
        }
    }
}
