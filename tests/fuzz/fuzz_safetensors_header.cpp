// libFuzzer target: the strict safetensors header parser.
//
// The input is a whole safetensors file (8-byte length, JSON, data). The
// parser must either throw ptwm::Error or return a header that keeps its
// promises; anything else (a crash, a sanitizer report, another exception
// type, a broken invariant) is a finding. So is any difference between the
// parser's two readers: the plain-form scan (store/plain_header.hpp) must
// read every header it takes exactly as the JSON library's reader does,
// and leave every other one, with its error, to that reader.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "ptwm/base/error.hpp"
#include "ptwm/store/safetensors.hpp"
#include "store/plain_header.hpp"

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

// The parse's whole outcome as text: the error, or every field the header has.
std::string outcome(std::span<const uint8_t> file, uint64_t file_size) {
    try {
        const auto h = ptwm::parse_safetensors(file, file_size, "fuzz");
        std::string out = "ok " + std::to_string(h.prefix.size()) + " " + h.metadata_json + "\n";
        for (const auto& t : h.tensors) {
            out += t.name + " " + std::to_string(static_cast<int>(t.dtype)) + " " + std::to_string(t.begin) + " " +
                   std::to_string(t.end);
            for (const uint64_t d : t.shape) out += " " + std::to_string(d);
            out += "\n";
        }
        for (const uint32_t i : h.by_name) out += std::to_string(i) + ",";
        return out;
    } catch (const ptwm::Error& e) {
        return std::string("error ") + e.what();
    }
}

void check_readers_agree(std::span<const uint8_t> file, uint64_t file_size) {
    const std::string with_scan = outcome(file, file_size);
    ptwm::allow_plain_header_scan(false);
    const std::string json_only = outcome(file, file_size);
    ptwm::allow_plain_header_scan(true);
    if (with_scan != json_only) std::abort();
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
    check_readers_agree(file, size);
    return 0;
}
