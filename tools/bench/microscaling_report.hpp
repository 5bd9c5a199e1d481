// Microscaling files (MXFP4, NVFP4) in codec_bench: the block scales and the
// FP4 values apart, each against what it is judged by (issue 13): the scales
// against their order-0 bound and zstd -19 of each scale tensor alone, the
// FP4 values against their order-0 per-plane bound.
#pragma once

#include <cstdio>
#include <string>

#include "ptwm/store/store_reader.hpp"

namespace bench {

struct MicroscalingFigures {
    size_t pairs = 0;  // FP4 tensors with their scale tensor
    double scale_bytes = 0, scale_stored = 0, scale_bound = 0, scale_zstd19 = 0;
    double fp4_bytes = 0, fp4_stored = 0, fp4_bound = 0;
    double fp4_group_bound = 0;  // the values in one plane per scale group (decompositions 10, 11)
};

// Decodes the store (checksums checked) and measures; pairs == 0 when it
// holds no paired FP4 tensor. codec_bench measures every file once and
// prints the figures after its table (report.cpp).
MicroscalingFigures measure_microscaling(const ptwm::StoreReader& store);

// One block per file, nothing for a file without microscaling tensors:
//   LABEL: N FP4 tensors with block scales
//     block scales  B bytes: ours R, order-0 bound R, zstd -19 per tensor R  [ok|ABOVE]
//     FP4 values    B bytes: ours R, order-0 bound R                         [ok|ABOVE]
//       (one plane per scale group, as stores before fp4-tables: order-0 bound R)
void print_microscaling_report(const MicroscalingFigures& f, const std::string& label, std::FILE* out = stdout);

}  // namespace bench
