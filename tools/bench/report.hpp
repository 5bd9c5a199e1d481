// codec_bench's output: the table with the project's targets checked per
// file, or one JSON object per file.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "bench_types.hpp"

namespace bench {

nlohmann::json to_json(const FileResult& r, const Options& opt);
void print_table(const std::vector<FileResult>& results, const Options& opt);

}  // namespace bench
