// libFuzzer target: the strict safetensors header parser.
//
// The input is a whole safetensors file (8-byte length, JSON, data). The
// parser must either throw ptwm::Error or return a header that keeps its
// promises; anything else (a crash, a sanitizer report, another exception
// type, a broken invariant) is a finding.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "ptwm/base/error.hpp"
#include "ptwm/store/safetensors.hpp"

namespace {

// What the header documents: the prefix is the length field plus the JSON,
// and the tensors, sorted by offset, tile the data section up to the end of
// the file. Checked so a parser that accepts garbage is a finding too.
void check_invariants(const ptwm::SafetensorsHeader& h, uint64_t file_size) {
    if (h.prefix.size() < 10 || h.prefix.size() > file_size) std::abort();
    uint64_t expected = h.data_begin();
    for (const auto& t : h.tensors) {
        if (t.begin != expected || t.end < t.begin) std::abort();
        expected = t.end;
    }
    if (expected != file_size) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> file(data, size);
    try {
        check_invariants(ptwm::parse_safetensors(file, size, "fuzz"), size);
    } catch (const ptwm::Error&) {
        // Rejected: the expected outcome for nearly every input.
    }
    // The same bytes as the head of a longer file: the header is parsed from
    // a prefix while the size says more data follows (how the reader and
    // read_safetensors_header call it). Must never read past `file`.
    try {
        check_invariants(ptwm::parse_safetensors(file, uint64_t{size} + 4096, "fuzz"), uint64_t{size} + 4096);
    } catch (const ptwm::Error&) {
    }
    return 0;
}
