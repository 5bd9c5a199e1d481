#include "ptwm/store/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <exception>
#include <unordered_set>

#include "ptwm/base/error.hpp"
#include "ptwm/base/file_io.hpp"
#include "store/plain_header.hpp"

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

// numel * d, or the error an overflow is.
template <class What>
uint64_t times_dimension(uint64_t numel, uint64_t d, const What& what_of) {
    if (d != 0 && numel > UINT64_MAX / d) throw Error(what_of() + ": the shape's element count overflows 64 bits");
    return numel * d;
}

// A tensor entry's fields, checked: `what_of()` names the entry in errors
// (made only for one: a header has up to tens of thousands of entries).
template <class What>
TensorInfo make_tensor(std::string name, std::string_view dtype_name, std::vector<uint64_t> shape, uint64_t begin,
                       uint64_t end, uint64_t data_begin, const What& what_of) {
    TensorInfo t;
    const auto dtype = parse_dtype(dtype_name);
    if (!dtype) throw Error(what_of() + ": unknown dtype \"" + std::string(dtype_name) + "\"");
    t.dtype = *dtype;

    uint64_t numel = 1;
    for (const uint64_t d : shape) numel = times_dimension(numel, d, what_of);
    t.shape = std::move(shape);
    if (end < begin)
        throw Error(what_of() + ": data_offsets end " + std::to_string(end) + " is before begin " + std::to_string(begin));
    const auto bytes = tensor_bytes(t.dtype, numel);
    if (!bytes)
        throw Error(what_of() + ": " + (numel <= UINT64_MAX / dtype_info(t.dtype).bits
                                           ? std::to_string(numel) + " elements of " + std::string(dtype_info(t.dtype).name) +
                                                 " do not make whole bytes"
                                           : std::string("the shape's byte count overflows 64 bits")));
    if (*bytes != end - begin)
        throw Error(what_of() + ": shape and dtype make " + std::to_string(*bytes) + " bytes but data_offsets span " +
                    std::to_string(end - begin));
    if (begin > UINT64_MAX - data_begin || end > UINT64_MAX - data_begin) throw Error(what_of() + ": data_offsets overflow");
    t.name = std::move(name);
    t.begin = data_begin + begin;
    t.end = data_begin + end;
    return t;
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

    // In the order the checks always came: the dtype, then each dimension's
    // type and the product so far, then the offsets' types (make_tensor
    // repeats the first two, which pass by then).
    const auto what_of = [&] { return what; };
    const std::string dtype_name = dtype_it->get<std::string>();
    if (!parse_dtype(dtype_name)) throw Error(what + ": unknown dtype \"" + dtype_name + "\"");
    std::vector<uint64_t> shape;
    uint64_t numel = 1;
    for (const auto& dim : *shape_it) {
        shape.push_back(json_u64(dim, what + ": a shape dimension"));
        numel = times_dimension(numel, shape.back(), what_of);
    }
    const uint64_t begin = json_u64((*offsets_it)[0], what + ": data_offsets[0]");
    const uint64_t end = json_u64((*offsets_it)[1], what + ": data_offsets[1]");
    return make_tensor(name, dtype_name, std::move(shape), begin, end, data_begin, what_of);
}

}  // namespace

namespace {

// The header in one SAX pass. Each top-level member (a tensor entry, or
// __metadata__) is built as a small JSON value of its own and handed to
// parse_tensor as soon as it ends; the whole header is never one DOM. A
// DOM of a 37,000-tensor header (5.5 MB) cost 0.3 s, mostly allocating,
// ordering and freeing its top-level map, and a mount pays that on the
// first read of each shard. The pass also rejects duplicate top-level keys
// (a DOM keeps the last one silently, and a duplicate tensor name makes the
// file ambiguous) and bounds the nesting (dump() and our callers recurse
// once per level; a damaged header must not exhaust the stack). Not a parse
// callback: with one, the library rescans the parent object after every
// member object, quadratic in the tensor count (minutes for 40000).
class HeaderReader final : public json::json_sax_t {
public:
    static constexpr int kMaxJsonDepth = 64;

    HeaderReader(SafetensorsHeader& header, uint64_t data_begin, std::string what)
        : header_(header), data_begin_(data_begin), what_(std::move(what)) {}

    // After the pass: the first problem, in the order a reader would want it.
    void throw_if_failed() const {
        if (too_deep_)
            throw Error(what_ + ": the header's JSON is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
        if (!duplicate_.empty()) throw Error(what_ + ": tensor name '" + duplicate_ + "' appears twice in the header");
        if (member_error_) std::rethrow_exception(member_error_);
    }

    bool null() override { return add(json(nullptr)); }
    bool boolean(bool v) override { return add(json(v)); }
    bool number_integer(number_integer_t v) override { return add(json(v)); }
    bool number_unsigned(number_unsigned_t v) override { return add(json(v)); }
    bool number_float(number_float_t v, const string_t&) override { return add(json(v)); }
    bool string(string_t& v) override { return add(json(std::move(v))); }
    bool binary(binary_t& v) override { return add(json::binary(std::move(v))); }
    bool start_object(std::size_t) override { return open(json::object()); }
    bool start_array(std::size_t) override { return open(json::array()); }
    bool end_object() override { return close(); }
    bool end_array() override { return close(); }
    bool key(string_t& name) override {
        if (depth_ == 1) {
            if (!names_.insert(name).second && duplicate_.empty()) duplicate_ = name;
            member_ = std::move(name);
        } else {
            key_ = std::move(name);
        }
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const json::exception& e) override { throw e; }

private:
    // A value inside the member being built, or a whole scalar member.
    bool add(json v) {
        if (stack_.empty()) {
            finish(std::move(v));
        } else if (stack_.back()->is_object()) {
            (*stack_.back())[key_] = std::move(v);
        } else {
            stack_.back()->push_back(std::move(v));
        }
        return true;
    }
    bool open(json container) {
        if (++depth_ > kMaxJsonDepth) {
            too_deep_ = true;
            return false;  // stops the pass
        }
        if (depth_ == 1) return true;  // the header object itself
        if (stack_.empty()) {
            value_ = std::move(container);
            stack_.push_back(&value_);
        } else if (stack_.back()->is_object()) {
            json& slot = (*stack_.back())[key_];
            slot = std::move(container);
            stack_.push_back(&slot);
        } else {
            stack_.back()->push_back(std::move(container));
            stack_.push_back(&stack_.back()->back());
        }
        return true;
    }
    bool close() {
        if (--depth_ == 0) return true;
        stack_.pop_back();
        if (stack_.empty()) finish(std::move(value_));
        return true;
    }
    // A top-level member has ended. Its problems are kept, not thrown, so
    // that invalid JSON later on is still reported as such.
    void finish(json value) {
        if (member_error_) return;
        try {
            if (member_ == "__metadata__") {
                if (!value.is_object()) throw Error(what_ + ": \"__metadata__\" is not a JSON object");
                header_.metadata_json = value.dump();
            } else {
                header_.tensors.push_back(parse_tensor(member_, value, data_begin_, what_));
            }
        } catch (const Error&) {
            member_error_ = std::current_exception();
        }
    }

    SafetensorsHeader& header_;
    const uint64_t data_begin_;
    const std::string what_;
    int depth_ = 0;
    bool too_deep_ = false;
    std::unordered_set<std::string> names_;
    std::string duplicate_;
    std::string member_;          // the top-level key being read
    std::string key_;             // the key of the next value inside it
    json value_;                  // the member being built
    std::vector<json*> stack_;    // its open containers, innermost last
    std::exception_ptr member_error_;
};

// The length of the header `head` begins with (8-byte length field and
// JSON), checked against `head` and the file's size.
uint64_t checked_prefix_length(std::span<const uint8_t> head, uint64_t file_size, const std::string& what) {
    if (file_size < 8 || head.size() < 8) throw Error(what + ": not a safetensors file: shorter than the 8-byte header length");
    const uint64_t json_len = load_u64le(head.data());
    if (json_len < 2 || json_len > kMaxHeaderBytes)
        throw Error(what + ": not a safetensors file: header length " + std::to_string(json_len) + " is outside 2.." +
                    std::to_string(kMaxHeaderBytes));
    if (json_len > file_size - 8)
        throw Error(what + ": header length " + std::to_string(json_len) + " runs past the end of the file (" +
                    std::to_string(file_size) + " bytes)");
    if (head.size() < 8 + json_len) throw Error(what + ": header truncated");
    if (head[8] != '{') throw Error(what + ": not a safetensors file: the header is not a JSON object");
    return 8 + json_len;
}

// The tensors and metadata of a header in the plain form (plain_header.hpp),
// as HeaderReader finds them; false, with `h` partly filled, where the
// header is not in that form or has anything wrong with it: HeaderReader
// then reads it and says what.
bool read_plain_header(std::span<const uint8_t> text, uint64_t data_begin, const std::string& what, SafetensorsHeader& h) {
    auto plain = scan_plain_header({reinterpret_cast<const char*>(text.data()), text.size()});
    if (!plain || plain->metadata_count > 1) return false;
    try {
        h.tensors.reserve(plain->tensors.size());
        for (PlainTensorEntry& e : plain->tensors)
            h.tensors.push_back(make_tensor(std::string(e.name), e.dtype, std::move(e.shape), e.begin, e.end, data_begin,
                                            [&] { return what + ": tensor '" + std::string(e.name) + "'"; }));
        h.metadata_json = !plain->metadata.empty() ? json::parse(plain->metadata).dump() : std::move(plain->metadata_json);
    } catch (const Error&) {
        return false;
    } catch (const json::exception&) {
        return false;
    }
    // Duplicate names (HeaderReader reports the first).
    std::vector<std::string_view> names;
    names.reserve(plain->tensors.size());
    for (const PlainTensorEntry& e : plain->tensors) names.push_back(e.name);
    std::sort(names.begin(), names.end());
    return std::adjacent_find(names.begin(), names.end()) == names.end();
}

// Everything but h.prefix, which the callers fill last (a copy of `prefix`,
// or the very bytes): a parse that throws has not taken them.
SafetensorsHeader parse_fields(std::span<const uint8_t> prefix, uint64_t file_size, const std::string& what) {
    const uint64_t data_begin = prefix.size();
    const auto text = prefix.subspan(8);
    SafetensorsHeader h;
    if (!read_plain_header(text, data_begin, what, h)) {
        h = {};
        HeaderReader reader(h, data_begin, what);
        try {
            json::sax_parse(text.begin(), text.end(), &reader);
        } catch (const json::exception& e) {
            throw Error(what + ": header is not valid JSON: " + e.what());
        }
        reader.throw_if_failed();
    }
    std::sort(h.tensors.begin(), h.tensors.end(),
              [](const TensorInfo& a, const TensorInfo& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });

    // The tensors must tile the data section exactly: no gap, no overlap.
    uint64_t expected = data_begin;
    const TensorInfo* previous = nullptr;
    for (const auto& t : h.tensors) {
        if (t.begin < expected)
            throw Error(what + ": tensor '" + t.name + "' overlaps tensor '" + previous->name + "' at data offset " +
                        std::to_string(t.begin - data_begin));
        if (t.begin > expected)
            throw Error(what + ": " + std::to_string(t.begin - expected) + " bytes at data offset " +
                        std::to_string(expected - data_begin) + " belong to no tensor (gap before '" + t.name + "')");
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

}  // namespace

SafetensorsHeader parse_safetensors(std::span<const uint8_t> head, uint64_t file_size, const std::string& what) {
    const auto prefix = head.first(checked_prefix_length(head, file_size, what));
    SafetensorsHeader h = parse_fields(prefix, file_size, what);
    h.prefix.assign(prefix.begin(), prefix.end());
    return h;
}

SafetensorsHeader parse_safetensors(std::vector<uint8_t>&& head, uint64_t file_size, const std::string& what) {
    const uint64_t prefix_length = checked_prefix_length(head, file_size, what);
    SafetensorsHeader h = parse_fields(std::span(head).first(prefix_length), file_size, what);
    head.resize(prefix_length);  // shrinks: the buffer stays where it is
    h.prefix = std::move(head);
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
    return parse_safetensors(std::move(head), size, path);
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
