#include "ptwm/store/chunk_index.hpp"

#include <algorithm>
#include <utility>

#include "ptwm/base/error.hpp"
#include "ptwm/planes/fp4_groups.hpp"

namespace ptwm {
namespace {

// Everything a chunk entry promises that can be checked without decoding.
void validate_entry(const ChunkEntry& e, size_t i, uint64_t expected_offset, uint64_t data_end,
                    const SafetensorsHeader& h, const std::string& what) {
    const std::string where = what + ": index entry " + std::to_string(i) + ": ";
    if (!is_known(e.decomposition))
        throw Error(where + "unknown decomposition id " + std::to_string(static_cast<int>(e.decomposition)));
    if (e.plane_count != plane_count(e.decomposition))
        throw Error(where + std::to_string(e.plane_count) + " planes where " + std::string(name(e.decomposition)) + " has " +
                    std::to_string(plane_count(e.decomposition)));
    for (unsigned p = 0; p < kMaxPlanes; ++p) {
        if (p < e.plane_count && !is_known(e.codec[p]))
            throw Error(where + "plane " + std::to_string(p) + " has unknown codec id " + std::to_string(static_cast<int>(e.codec[p])));
        if (p >= e.plane_count && e.payload_length[p] != 0) throw Error(where + "payload length set for an unused plane");
        if (p < e.plane_count && is_context_model(e.codec[p]) && e.original_length > kMaxModelledChunkBytes)
            throw Error(where + "plane " + std::to_string(p) + " uses " + std::string(name(e.codec[p])) + " on a chunk of " +
                        std::to_string(e.original_length) + " bytes, over the " +
                        std::to_string(kMaxModelledChunkBytes) + " a context model may code");
    }
    if (e.original_offset != expected_offset)
        throw Error(where + "starts at original offset " + std::to_string(e.original_offset) + " where " +
                    std::to_string(expected_offset) + " is expected (chunks must tile the data section)");
    if (e.original_length == 0 || e.original_length > kMaxChunkBytes || e.original_length > data_end - e.original_offset)
        throw Error(where + "length " + std::to_string(e.original_length) + " does not fit the data section");
    if (e.original_length % element_bytes(e.decomposition) != 0)
        throw Error(where + "length " + std::to_string(e.original_length) + " is not a whole number of elements");
    if (e.tensor >= h.tensors.size() || e.original_offset < h.tensors[e.tensor].begin ||
        e.original_offset + e.original_length > h.tensors[e.tensor].end)
        throw Error(where + "lies outside its tensor");
    if (is_grouped(e.decomposition)) {
        const TensorInfo& t = h.tensors[e.tensor];
        if (e.scale_tensor >= h.tensors.size() || e.scale_tensor == e.tensor ||
            h.tensors[e.scale_tensor].size() * block_bytes(e.decomposition) != t.size() ||
            (e.original_offset - t.begin) % block_bytes(e.decomposition) != 0)
            throw Error(where + "its scale tensor " + std::to_string(e.scale_tensor) + " does not pair with tensor '" +
                        t.name + "'");
    } else if (e.scale_tensor != kNoTensor) {
        throw Error(where + "names a scale tensor but its decomposition uses none");
    }
}

}  // namespace

void check_chunk_index(std::span<const uint8_t> index, const Superblock& sb, const SafetensorsHeader& header,
                       const std::string& what, const std::function<void(const ChunkEntry&)>& each) {
    if (index.size() != sb.chunk_count * kChunkEntryBytes)
        throw Error(what + ": the index holds " + std::to_string(index.size()) + " bytes for " +
                    std::to_string(sb.chunk_count) + " chunks");
    const uint64_t data_begin = sb.prefix.length, data_end = sb.original_size;
    const uint64_t payload_begin = sb.prefix.offset + sb.prefix.stored_length;
    uint64_t expected_offset = data_begin, stored_end = payload_begin;
    // A grouped chunk's scales must decode on their own: no chains of pairs.
    std::vector<bool> grouped_tensor(header.tensors.size());
    std::vector<std::pair<size_t, uint32_t>> scale_uses;  // (chunk, scale tensor) of grouped chunks
    for (size_t i = 0; i < sb.chunk_count; ++i) {
        const ChunkEntry e = decode_chunk_entry(
            std::span<const uint8_t, kChunkEntryBytes>(index.data() + i * kChunkEntryBytes, kChunkEntryBytes));
        validate_entry(e, i, expected_offset, data_end, header, what);
        if (e.stored_offset < stored_end || e.stored_offset > sb.index.offset ||
            e.stored_length() > sb.index.offset - e.stored_offset)
            throw Error(what + ": index entry " + std::to_string(i) + ": its payload (" + std::to_string(e.stored_length()) +
                        " bytes at " + std::to_string(e.stored_offset) +
                        ") overlaps another chunk or lies outside the chunk data");
        expected_offset += e.original_length;
        stored_end = e.stored_offset + e.stored_length();
        if (is_grouped(e.decomposition)) {
            grouped_tensor[e.tensor] = true;
            scale_uses.emplace_back(i, e.scale_tensor);
        }
        if (each) each(e);
    }
    for (auto [i, scale_tensor] : scale_uses)
        if (grouped_tensor[scale_tensor])
            throw Error(what + ": index entry " + std::to_string(i) + ": its scale tensor is itself grouped");
    if (expected_offset != data_end)
        throw Error(what + ": the chunks cover the data section up to " + std::to_string(expected_offset) + " of " +
                    std::to_string(data_end) + " bytes");
}


size_t ChunkIndex::CodingHash::operator()(const Coding& c) const {
    size_t h = static_cast<size_t>(c.decomposition) * 0x9E3779B97F4A7C15ull;
    h ^= (static_cast<size_t>(c.plane_count) << 8) ^ (static_cast<size_t>(c.group_base) << 16) ^
         (static_cast<size_t>(c.scale_tensor) << 24);
    for (Codec codec : c.codec) h = h * 31 + static_cast<size_t>(codec);
    return h;
}

uint32_t ChunkIndex::coding_id(const Coding& c) {
    auto [it, added] = coding_ids_.try_emplace(c, static_cast<uint32_t>(codings_.size()));
    if (added) codings_.push_back(c);
    return it->second;
}

void ChunkIndex::reserve(size_t chunks) {
    checksum_.reserve(chunks);
    original_length_.reserve(chunks);
    tensor_.reserve(chunks);
    coding_.reserve(chunks);
    const size_t blocks = (chunks + kBlock - 1) / kBlock;
    block_original_offset_.reserve(blocks);
    block_stored_offset_.reserve(blocks);
    block_payload_at_.reserve(blocks);
}

void ChunkIndex::push_back(const ChunkEntry& e) {
    const size_t i = size();
    const uint64_t stored_gap = i == 0 ? 0 : e.stored_offset - next_stored_offset_;
    if (i % kBlock == 0) {
        block_original_offset_.push_back(e.original_offset);
        block_stored_offset_.push_back(e.stored_offset);
        block_payload_at_.push_back(payload_length_.size());
    }
    if (stored_gap != 0 && gap_.empty()) gap_.assign(i, 0);
    if (!gap_.empty()) gap_.push_back(i % kBlock == 0 ? 0 : stored_gap);  // a block start keeps its offset

    Coding c;
    c.decomposition = e.decomposition;
    c.plane_count = e.plane_count;
    c.group_base = e.group_base;
    c.codec = e.codec;
    c.scale_tensor = e.scale_tensor;
    coding_.push_back(coding_id(c));
    checksum_.push_back(e.checksum);
    original_length_.push_back(e.original_length);
    tensor_.push_back(e.tensor);
    for (unsigned p = 0; p < e.plane_count && p < kMaxPlanes; ++p) payload_length_.push_back(e.payload_length[p]);
    next_original_offset_ = e.original_offset + e.original_length;
    next_stored_offset_ = e.stored_offset + e.stored_length();
}

void ChunkIndex::finish() {
    coding_ids_ = {};
    for (auto* v : {&checksum_, &block_original_offset_, &block_stored_offset_, &block_payload_at_, &gap_})
        v->shrink_to_fit();
    for (auto* v : {&original_length_, &tensor_, &coding_, &payload_length_}) v->shrink_to_fit();
    codings_.shrink_to_fit();
}

uint64_t ChunkIndex::stored_length(size_t i, uint64_t payload_at) const {
    uint64_t total = 0;
    for (unsigned p = 0; p < codings_[coding_[i]].plane_count; ++p) total += payload_length_[payload_at + p];
    return total;
}

uint64_t ChunkIndex::original_offset(size_t i) const {
    const size_t block = i / kBlock;
    uint64_t offset = block_original_offset_[block];
    for (size_t j = block * kBlock; j < i; ++j) offset += original_length_[j];
    return offset;
}

ChunkEntry ChunkIndex::entry(size_t i) const {
    const size_t block = i / kBlock;
    uint64_t original = block_original_offset_[block];
    uint64_t stored = block_stored_offset_[block];
    uint64_t payload_at = block_payload_at_[block];
    for (size_t j = block * kBlock; j < i; ++j) {
        original += original_length_[j];
        stored += stored_length(j, payload_at) + gap(j + 1);
        payload_at += codings_[coding_[j]].plane_count;
    }
    const Coding& c = codings_[coding_[i]];
    ChunkEntry e;
    e.original_offset = original;
    e.stored_offset = stored;
    e.checksum = checksum_[i];
    e.original_length = original_length_[i];
    e.tensor = tensor_[i];
    e.decomposition = c.decomposition;
    e.plane_count = c.plane_count;
    e.codec = c.codec;
    e.scale_tensor = c.scale_tensor;
    e.group_base = c.group_base;
    for (unsigned p = 0; p < c.plane_count; ++p) e.payload_length[p] = payload_length_[payload_at + p];
    return e;
}

bool ChunkIndex::is_raw(size_t i) const {
    const Coding& c = codings_[coding_[i]];
    return c.decomposition == Decomposition::stream && c.codec[0] == Codec::raw;
}

size_t ChunkIndex::find(uint64_t offset) const {
    const auto it = std::upper_bound(block_original_offset_.begin(), block_original_offset_.end(), offset);
    const size_t block = static_cast<size_t>(it - block_original_offset_.begin()) - 1;
    size_t i = block * kBlock;
    const size_t last = std::min(size(), i + kBlock) - 1;
    uint64_t end = block_original_offset_[block] + original_length_[i];
    while (i < last && end <= offset) end += original_length_[++i];
    return i;
}

size_t ChunkIndex::memory_bytes() const {
    auto bytes = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
    return bytes(checksum_) + bytes(original_length_) + bytes(tensor_) + bytes(coding_) + bytes(payload_length_) +
           bytes(block_original_offset_) + bytes(block_stored_offset_) + bytes(block_payload_at_) + bytes(gap_) +
           bytes(codings_);
}

}  // namespace ptwm
