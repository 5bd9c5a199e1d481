// Helpers of the damaged-input tests (damaged_safetensors_test.cpp,
// damaged_store_test.cpp): a scratch directory, files in and out, a
// safetensors file from its JSON, and the check that an error is thrown
// saying what is wrong.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "ptwm/base/error.hpp"

namespace damaged {

using Bytes = std::vector<uint8_t>;

class TempDir {
public:
    TempDir() {
        std::string templ = (std::filesystem::temp_directory_path() / "ptwm-damaged-XXXXXX").string();
        if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
        path_ = templ;
    }
    ~TempDir() { std::filesystem::remove_all(path_); }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

inline void write_file(const std::string& path, const Bytes& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}
inline Bytes read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
}

// 8-byte little-endian JSON length, the JSON, then `data`.
inline Bytes safetensors(const std::string& json, const Bytes& data = {}) {
    // Reserved whole first: GCC 12 warned (-Warray-bounds, a false
    // positive) on the copy an 8-byte vector's growth would make.
    Bytes b;
    b.reserve(8 + json.size() + data.size());
    b.resize(8);
    for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(uint64_t{json.size()} >> (8 * i));
    b.insert(b.end(), json.begin(), json.end());
    b.insert(b.end(), data.begin(), data.end());
    return b;
}
inline Bytes with_length_field(Bytes b, uint64_t length) {
    for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(length >> (8 * i));
    return b;
}

// Runs `fn`, which must throw exactly E (a CorruptData where an Error is
// expected still passes: it is one). Every needle must be in the message.
template <typename E = ptwm::Error, typename Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string> needles) {
    try {
        fn();
    } catch (const E& e) {
        const std::string what = e.what();
        for (const auto& needle : needles) EXPECT_NE(what.find(needle), std::string::npos) << "'" << needle << "' not in: " << what;
        return;
    }
    std::string all;
    for (const auto& needle : needles) all += " '" + needle + "'";
    ADD_FAILURE() << "no exception; expected one saying" << all;
}

}  // namespace damaged
