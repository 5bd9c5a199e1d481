// The ZipNN peer of the benchmarks: zipnn_peer.py (ZipNN's per-tensor mode,
// one thread, in memory) in a child process under .venv's python, driven
// line by line so that its timings are taken in the same rounds as ours
// and zstd's. When python, zipnn or the script is missing, start() says why
// and the bench prints '-' for ZipNN.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace bench {

struct ZipnnOpen {
    uint64_t stored = 0;  // header + raw tensors + ZipNN's buffers
    uint64_t coded = 0;   // original bytes of the tensors ZipNN compressed
    int tensors = 0, compressed_tensors = 0;
};

struct ZipnnRound {
    double compress_s = 0, compress_cpu_s = 0, decompress_s = 0, decompress_cpu_s = 0;
};

class ZipnnPeer {
public:
    ZipnnPeer() = default;
    ZipnnPeer(const ZipnnPeer&) = delete;
    ZipnnPeer& operator=(const ZipnnPeer&) = delete;
    ~ZipnnPeer();

    // Starts `python script`; nullopt when it runs and imported zipnn, else why not.
    std::optional<std::string> start(const std::string& python, const std::string& script);
    bool running() const { return pid_ > 0; }
    const std::string& version() const { return version_; }

    // Loads a file, compresses it once and checks ZipNN's round trip; throws
    // std::runtime_error with the peer's message when it cannot.
    ZipnnOpen open(const std::string& path);
    // One timed compression and decompression of the open file.
    ZipnnRound round();

private:
    nlohmann::json call(const std::string& line);
    void stop();

    pid_t pid_ = -1;
    FILE* to_ = nullptr;
    FILE* from_ = nullptr;
    std::string version_;
};

}  // namespace bench
