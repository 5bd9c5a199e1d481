// Helpers for tests that need files: a temporary directory removed at the
// end, and small safetensors files built in memory.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace ptwm::test {

class TempDir {
public:
    TempDir() {
        std::string templ = (std::filesystem::temp_directory_path() / "ptwm-test-XXXXXX").string();
        path_ = ::mkdtemp(templ.data());
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

private:
    std::filesystem::path path_;
};

struct TestTensor {
    std::string name;
    std::string dtype;
    std::vector<uint64_t> shape;
    std::vector<uint8_t> bytes;
};

// A safetensors file's bytes: 8-byte length, JSON header (padded with spaces
// to 8 bytes as the reference writer does), then the tensors in order.
inline std::vector<uint8_t> make_safetensors(const std::vector<TestTensor>& tensors, const std::string& metadata = "") {
    std::string json = "{";
    if (!metadata.empty()) json += "\"__metadata__\":" + metadata + ",";
    uint64_t at = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const auto& t = tensors[i];
        // Appends, not `"," + std::string(...)`: g++ 12 warns falsely (-Wrestrict) on the latter.
        if (i) json += ',';
        json.append("\"").append(t.name).append("\":{\"dtype\":\"").append(t.dtype).append("\",\"shape\":[");
        for (size_t d = 0; d < t.shape.size(); ++d) {
            if (d) json += ',';
            json += std::to_string(t.shape[d]);
        }
        json += "],\"data_offsets\":[" + std::to_string(at) + "," + std::to_string(at + t.bytes.size()) + "]}";
        at += t.bytes.size();
    }
    json += "}";
    while (json.size() % 8) json += ' ';
    std::vector<uint8_t> out;
    out.reserve(8 + json.size() + at);
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(json.size() >> (8 * i)));
    out.insert(out.end(), json.begin(), json.end());
    for (const auto& t : tensors) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
    return out;
}

inline void write_file(const std::filesystem::path& p, const std::vector<uint8_t>& bytes) {
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<uint8_t> read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

// Weight-like values: normal with a small sigma, as trained weights are.
inline std::vector<float> normal_floats(size_t n, uint32_t seed, float sigma = 0.02f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, sigma);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

inline std::vector<uint8_t> as_f32_bytes(const std::vector<float>& v) {
    std::vector<uint8_t> out(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
}

// bf16 by truncation of the f32 bits (the high half of each value).
inline std::vector<uint8_t> as_bf16_bytes(const std::vector<float>& v) {
    std::vector<uint8_t> out(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
        uint32_t bits;
        std::memcpy(&bits, &v[i], 4);
        out[2 * i] = static_cast<uint8_t>(bits >> 16);
        out[2 * i + 1] = static_cast<uint8_t>(bits >> 24);
    }
    return out;
}

// The shared corpus of real weights, when this checkout sits beside it.
inline std::filesystem::path corpus_dir() {
    return std::filesystem::path(PTWM_SOURCE_ROOT) / ".." / "shared" / "corpus";
}

}  // namespace ptwm::test
