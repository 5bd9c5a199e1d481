#include "ptwm/store/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "ptwm/base/error.hpp"
#include "ptwm/base/file_io.hpp"

namespace ptwm {

std::optional<uint32_t> SafetensorsHeader::find(std::string_view name) const {
    const auto it = std::lower_bound(by_name.begin(), by_name.end(), name,
                                     [&](uint32_t i, std::string_view n) { return tensors[i].name < n; });
    if (it == by_name.end() || tensors[*it].name != name) return std::nullopt;
    return *it;
}
namespace {

using nlohmann::json;

uint64_t load_u64le(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

uint64_t json_u64(const json& v, const std::string& what) {
    if (!v.is_number_unsigned()) throw Error(what + " is not a non-negative integer");
    return v.get<uint64_t>();
}

TensorInfo parse_tensor(const std::string& name, const json& entry, uint64_t data_begin, const std::string& where) {
    const std::string what = where + ": tensor '" + name + "'";
    if (!entry.is_object()) throw Error(what + ": entry is not a JSON object");
    const auto dtype_it = entry.find("dtype");
    const auto shape_it = entry.find("shape");
    const auto offsets_it = entry.find("data_offsets");
    if (dtype_it == entry.end() || !dtype_it->is_string()) throw Error(what + ": missing or non-string \"dtype\"");
    if (shape_it == entry.end() || !shape_it->is_array()) throw Error(what + ": missing or non-array \"shape\"");
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2)
        throw Error(what + ": \"data_offsets\" is not a pair [begin, end]");

    TensorInfo t;
    t.name = name;
    const auto dtype = parse_dtype(dtype_it->get<std::string>());
    if (!dtype) throw Error(what + ": unknown dtype \"" + dtype_it->get<std::string>() + "\"");
    t.dtype = *dtype;

    uint64_t numel = 1;
    for (const auto& dim : *shape_it) {
        const uint64_t d = json_u64(dim, what + ": a shape dimension");
        if (d != 0 && numel > UINT64_MAX / d) throw Error(what + ": the shape's element count overflows 64 bits");
        numel *= d;
        t.shape.push_back(d);
    }
    const uint64_t begin = json_u64((*offsets_it)[0], what + ": data_offsets[0]");
    const uint64_t end = json_u64((*offsets_it)[1], what + ": data_offsets[1]");
    if (end < begin) throw Error(what + ": data_offsets end " + std::to_string(end) + " is before begin " + std::to_string(begin));
    const auto bytes = tensor_bytes(t.dtype, numel);
    if (!bytes)
        throw Error(what + ": " + (dtype_info(t.dtype).bits == 4
                                       ? std::to_string(numel) + " elements of F4 do not make whole bytes"
                                       : std::string("the shape's byte count overflows 64 bits")));
    if (*bytes != end - begin)
        throw Error(what + ": shape and dtype make " + std::to_string(*bytes) + " bytes but data_offsets span " +
                    std::to_string(end - begin));
    if (begin > UINT64_MAX - data_begin || end > UINT64_MAX - data_begin) throw Error(what + ": data_offsets overflow");
    t.begin = data_begin + begin;
    t.end = data_begin + end;
    return t;
}

}  // namespace

namespace {

// The first pass of parse_safetensors: depth and duplicate top-level keys.
struct HeaderCheck final : json::json_sax_t {
    static constexpr int kMaxJsonDepth = 64;
    int depth = 0;
    bool too_deep = false;
    std::set<std::string> keys;
    std::string duplicate;

    bool open() {
        too_deep = too_deep || ++depth > kMaxJsonDepth;
        return !too_deep;  // false stops the pass
    }
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return open(); }
    bool key(string_t& name) override {
        if (depth == 1 && !keys.insert(name).second && duplicate.empty()) duplicate = name;
        return true;
    }
    bool end_object() override { return --depth, true; }
    bool start_array(std::size_t) override { return open(); }
    bool end_array() override { return --depth, true; }
    bool parse_error(std::size_t, const std::string&, const json::exception& e) override { throw e; }
};

}  // namespace

SafetensorsHeader parse_safetensors(std::span<const uint8_t> head, uint64_t file_size, const std::string& what) {
    if (file_size < 8 || head.size() < 8) throw Error(what + ": not a safetensors file: shorter than the 8-byte header length");
    const uint64_t json_len = load_u64le(head.data());
    if (json_len < 2 || json_len > kMaxHeaderBytes)
        throw Error(what + ": not a safetensors file: header length " + std::to_string(json_len) + " is outside 2.." +
                    std::to_string(kMaxHeaderBytes));
    if (json_len > file_size - 8)
        throw Error(what + ": header length " + std::to_string(json_len) + " runs past the end of the file (" +
                    std::to_string(file_size) + " bytes)");
    if (head.size() < 8 + json_len) throw Error(what + ": header truncated");
    const auto text = head.subspan(8, json_len);
    if (text[0] != '{') throw Error(what + ": not a safetensors file: the header is not a JSON object");

    // A first pass over the text, building nothing: reject duplicate keys
    // at the top level (the JSON library would keep the last one silently,
    // and a duplicate tensor name makes the file ambiguous) and bound the
    // nesting (the JSON library's dump() and our callers recurse once per
    // level, and a damaged header must not exhaust the stack). Not a parse
    // callback: with one, the library rescans the parent object after every
    // member object, quadratic in the tensor count (minutes for 40000).
    HeaderCheck check;
    try {
        json::sax_parse(text.begin(), text.end(), &check);
    } catch (const json::exception& e) {
        throw Error(what + ": header is not valid JSON: " + e.what());
    }
    const bool too_deep = check.too_deep;
    const std::string& duplicate = check.duplicate;
    json root;
    try {
        if (!too_deep) root = json::parse(text.begin(), text.end());
    } catch (const json::exception& e) {
        throw Error(what + ": header is not valid JSON: " + e.what());
    }
    if (too_deep)
        throw Error(what + ": the header's JSON is nested deeper than " + std::to_string(HeaderCheck::kMaxJsonDepth) + " levels");
    if (!root.is_object()) throw Error(what + ": not a safetensors file: the header is not a JSON object");
    if (!duplicate.empty()) throw Error(what + ": tensor name '" + duplicate + "' appears twice in the header");

    SafetensorsHeader h;
    h.prefix.assign(head.begin(), head.begin() + static_cast<std::ptrdiff_t>(8 + json_len));
    for (const auto& [key, value] : root.items()) {
        if (key == "__metadata__") {
            if (!value.is_object()) throw Error(what + ": \"__metadata__\" is not a JSON object");
            h.metadata_json = value.dump();
            continue;
        }
        h.tensors.push_back(parse_tensor(key, value, h.data_begin(), what));
    }
    std::sort(h.tensors.begin(), h.tensors.end(),
              [](const TensorInfo& a, const TensorInfo& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });

    // The tensors must tile the data section exactly: no gap, no overlap.
    uint64_t expected = h.data_begin();
    const TensorInfo* previous = nullptr;
    for (const auto& t : h.tensors) {
        if (t.begin < expected)
            throw Error(what + ": tensor '" + t.name + "' overlaps tensor '" + previous->name + "' at data offset " +
                        std::to_string(t.begin - h.data_begin()));
        if (t.begin > expected)
            throw Error(what + ": " + std::to_string(t.begin - expected) + " bytes at data offset " +
                        std::to_string(expected - h.data_begin()) + " belong to no tensor (gap before '" + t.name + "')");
        expected = t.end;
        previous = &t;
    }
    if (expected > file_size)
        throw Error(what + ": tensor '" + previous->name + "' ends at byte " + std::to_string(expected) +
                    ", past the end of the file (" + std::to_string(file_size) + " bytes)");
    if (expected < file_size)
        throw Error(what + ": " + std::to_string(file_size - expected) + " bytes after the last tensor belong to no tensor");
    h.by_name.resize(h.tensors.size());
    std::iota(h.by_name.begin(), h.by_name.end(), 0u);
    std::sort(h.by_name.begin(), h.by_name.end(),
              [&](uint32_t a, uint32_t b) { return h.tensors[a].name < h.tensors[b].name; });
    return h;
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
    const File f = File::open_read(path);
    const uint64_t size = f.size();
    std::vector<uint8_t> head(std::min<uint64_t>(size, 8));
    f.read_exact(0, head);
    if (head.size() == 8) {
        uint64_t json_len = load_u64le(head.data());
        if (json_len <= kMaxHeaderBytes && json_len <= size - 8) {
            head.resize(8 + json_len);
            f.read_exact(8, std::span(head).subspan(8));
        }
    }
    return parse_safetensors(head, size, path);
}

bool looks_like_safetensors(const std::string& path) {
    try {
        const File f = File::open_read(path);
        const uint64_t size = f.size();
        if (size < 10) return false;
        uint8_t head[9];
        f.read_exact(0, head);
        const uint64_t json_len = load_u64le(head);
        return json_len >= 2 && json_len <= kMaxHeaderBytes && json_len <= size - 8 && head[8] == '{';
    } catch (const Error&) {
        return false;
    }
}

}  // namespace ptwm
