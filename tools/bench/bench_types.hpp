// What codec_bench measures for one file, and the options it ran with:
// shared by the measuring (codec_bench.cpp) and the reporting (report.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "microscaling_report.hpp"
#include "ptwm/base/parallel.hpp"
#include "timing.hpp"

namespace bench {

// codec_bench's command line (kUsage in codec_bench.cpp).
struct Options {
    std::vector<std::string> inputs;
    int reps = 5;
    int cli_reps = 11;
    int level = 3;
    unsigned threads = ptwm::default_threads();
    std::string tool;
    std::string zstd = "zstd";
    std::string tmp = "/dev/shm";
    bool cli = true;
    bool json = false;
    bool zipnn = true;
    std::string zipnn_python = std::string(PTWM_SOURCE_ROOT) + "/.venv/bin/python";
    std::string zipnn_script = std::string(PTWM_SOURCE_ROOT) + "/tools/bench/zipnn_peer.py";
};

// The order-0 bounds a file's ratio is judged against (compute_bounds).
struct Bounds {
    double header_bytes = 0;
    double plane_bound_bytes = 0;  // header + per tensor, per plane order-0 over the whole tensor
    double byte_bound_bytes = 0;   // header + F8 tensors: whole-byte order-0; others: as plane bound
    bool has_f8 = false;
    std::map<std::string, uint64_t> dtype_bytes;  // tensor bytes per dtype name
};

// Everything measured on one file.
struct FileResult {
    std::string path, name, dtype;
    uint64_t size = 0, stored = 0, zstd3 = 0, zstd19 = 0;
    Bounds bounds;
    MicroscalingFigures micro;  // FP4 values and block scales apart (pairs == 0: none)
    // In memory, best of --reps.
    Best pack1, packN, unpack1, unpackN, unpack1_payload, unpackN_payload, z3c, z3d;
    // Command line, --cli-reps interleaved rounds (targets: paired_ratio).
    Best cli_pack1, cli_packN, cli_unpack1, cli_unpackN, cli_z3c, cli_z3d;
    bool cli_failed = false;
    // ZipNN per tensor, one thread, in memory, best of --reps (zipnn_peer.py).
    bool zipnn = false;  // measured on this file
    uint64_t zipnn_stored = 0;
    uint64_t zipnn_coded = 0;  // bytes of the tensors ZipNN compressed (it leaves integer ones raw)
    Best zipnn_c, zipnn_d;
    // ZipNN's MB/s say something only where it codes most of the file (not
    // for packed FP4, which it does not code: it would "decode" at memcpy speed).
    bool zipnn_speed_meaningful() const { return zipnn && zipnn_coded * 2 >= size; }

    double ratio(double bytes) const { return bytes / static_cast<double>(size); }
    double target_bound() const { return bounds.has_f8 ? bounds.byte_bound_bytes : bounds.plane_bound_bytes; }
    double gap_percent() const { return (static_cast<double>(stored) / target_bound() - 1) * 100; }
};

}  // namespace bench
