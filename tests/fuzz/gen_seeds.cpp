// Writes the inputs the fuzz seed corpora are made from (make_corpus.sh runs
// it and packs the safetensors files with ptwmfs-tool):
//   OUT/st/*.safetensors   small valid safetensors files, every dtype family
//   OUT/planes/*           plane_decoders inputs: a chunk entry header and
//                          the payload encode_chunk / encode_with produced
// Deterministic (fixed PRNG seed) so regenerating gives the same corpus.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <xxhash.h>

#include "codecs/f8_tables.hpp"
#include "codecs/fp4_tables.hpp"
#include "ptwm/codecs/codec.hpp"
#include "ptwm/store/chunk_codec.hpp"
#include "ptwm/store/store_format.hpp"
#include "ptwm/store/store_reader.hpp"

namespace {

std::mt19937_64 rng(20240601);

struct Tensor {
    std::string name, dtype, shape;
    std::vector<uint8_t> bytes;
};

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                static_cast<std::streamsize>(bytes.size()));
}

void write_safetensors(const std::string& path, const std::vector<Tensor>& tensors, const std::string& metadata = "") {
    std::string json = "{";
    if (!metadata.empty()) json += "\"__metadata__\":" + metadata + ",";
    uint64_t at = 0;
    for (const auto& t : tensors) {
        json += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":" + t.shape + ",\"data_offsets\":[" +
                std::to_string(at) + "," + std::to_string(at + t.bytes.size()) + "]},";
        at += t.bytes.size();
    }
    json.back() = '}';
    while (json.size() % 8) json += ' ';  // safetensors pads the header to 8 bytes
    std::vector<uint8_t> file(8);
    for (int i = 0; i < 8; ++i) file[i] = static_cast<uint8_t>(uint64_t{json.size()} >> (8 * i));
    file.insert(file.end(), json.begin(), json.end());
    for (const auto& t : tensors) file.insert(file.end(), t.bytes.begin(), t.bytes.end());
    write_file(path, file);
}

// Weight-like values: normal floats, so exponents are few and mantissas noisy.
std::vector<uint8_t> bf16(size_t n, float sigma) {
    std::normal_distribution<float> dist(0, sigma);
    std::vector<uint8_t> b(2 * n);
    for (size_t i = 0; i < n; ++i) {
        const float f = dist(rng);
        uint32_t u;
        std::memcpy(&u, &f, 4);
        b[2 * i] = static_cast<uint8_t>(u >> 16), b[2 * i + 1] = static_cast<uint8_t>(u >> 24);
    }
    return b;
}
std::vector<uint8_t> f32(size_t n, float sigma) {
    std::normal_distribution<float> dist(1, sigma);
    std::vector<uint8_t> b(4 * n);
    for (size_t i = 0; i < n; ++i) {
        const float f = dist(rng);
        std::memcpy(&b[4 * i], &f, 4);
    }
    return b;
}
std::vector<uint8_t> small_ints(size_t n, unsigned spread) {  // low-entropy bytes (fp8, scales)
    std::binomial_distribution<unsigned> dist(spread, 0.5);
    std::vector<uint8_t> b(n);
    for (auto& x : b) x = static_cast<uint8_t>(0x30 + dist(rng));
    return b;
}
// Packed E2M1 values as quantised weights have them: small magnitudes
// most often, either sign (so fp4-tables beats coding the bytes whole).
std::vector<uint8_t> fp4_values(size_t n) {
    std::binomial_distribution<unsigned> mag(7, 0.25);
    std::vector<uint8_t> b(n);
    for (auto& x : b) x = static_cast<uint8_t>(mag(rng) | (rng() & 8) | (mag(rng) | (rng() & 8)) << 4);
    return b;
}
std::vector<uint8_t> random_bytes(size_t n) {
    std::vector<uint8_t> b(n);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    return b;
}
// Correlated scales: runs of slowly drifting values, where order-1 rANS wins.
std::vector<uint8_t> scales(size_t n) {
    std::vector<uint8_t> b(n);
    uint8_t v = 120;
    for (size_t i = 0; i < n; ++i) {
        if (rng() % 16 == 0) v = static_cast<uint8_t>(v + static_cast<int>(rng() % 3) - 1);
        b[i] = v;
    }
    return b;
}

// plane_decoders input: see the layout in fuzz_plane_decoders.cpp.
// simd_path: byte 27, which f8-tables and fp4-tables decoder the target runs
// (0 the CPU's best, 1 AVX2 with vpgatherdd, 2 AVX2 with scalar loads, 3
// scalar). where: byte 28, the layout (index into the target's
// kShapes, offset 0); block scales, when the chunk needs them, follow the payload.
void write_plane_seed(const std::string& path, const ptwm::ChunkEntry& e, const std::vector<uint8_t>& payload,
                      uint8_t simd_path = 0, uint8_t where = 0, const std::vector<uint8_t>& block_scales = {}) {
    std::vector<uint8_t> s(29, 0);
    s[27] = simd_path;
    s[28] = where;
    s[0] = static_cast<uint8_t>(e.decomposition);
    for (int i = 0; i < 4; ++i) s[1 + i] = static_cast<uint8_t>(e.original_length >> (8 * i));
    for (unsigned p = 0; p < ptwm::kMaxPlanes; ++p) s[5 + p] = static_cast<uint8_t>(e.codec[p]);
    for (unsigned p = 0; p + 1 < ptwm::kMaxPlanes; ++p) {
        s[13 + 2 * p] = static_cast<uint8_t>(e.payload_length[p]);
        s[14 + 2 * p] = static_cast<uint8_t>(e.payload_length[p] >> 8);
    }
    s.insert(s.end(), payload.begin(), payload.end());
    s.insert(s.end(), block_scales.begin(), block_scales.end());
    write_file(path, s);
}

// The same store with its header and index sections stored raw: the tool
// zstd-compresses them, and a fuzzer mutating a zstd frame rarely yields an
// index entry that still decodes, so these seeds let it edit entries directly.
void write_raw_sections(const std::string& in_path, const std::string& out_path) {
    const auto store = ptwm::StoreReader::open(in_path);
    std::ifstream f(in_path, std::ios::binary);
    const std::vector<uint8_t> old((std::istreambuf_iterator<char>(f)), {});
    ptwm::Superblock sb = store->superblock();
    const uint64_t old_data = sb.prefix.offset + sb.prefix.stored_length;
    std::vector<uint8_t> out(ptwm::kSuperblockBytes);
    const auto prefix = store->prefix();
    sb.prefix = {out.size(), prefix.size(), prefix.size(), XXH3_64bits(prefix.data(), prefix.size()), ptwm::Codec::raw};
    out.insert(out.end(), prefix.begin(), prefix.end());
    const uint64_t delta = out.size() - old_data;  // unsigned wrap-around is fine: added back below
    out.insert(out.end(), old.begin() + static_cast<std::ptrdiff_t>(old_data),
               old.begin() + static_cast<std::ptrdiff_t>(sb.index.offset));
    std::vector<uint8_t> index(store->chunk_count() * ptwm::kChunkEntryBytes);
    for (size_t i = 0; i < store->chunk_count(); ++i) {
        ptwm::ChunkEntry e = store->chunk(i);
        e.stored_offset += delta;
        ptwm::encode_chunk_entry(e, std::span<uint8_t, ptwm::kChunkEntryBytes>(index.data() + i * ptwm::kChunkEntryBytes,
                                                                             ptwm::kChunkEntryBytes));
    }
    sb.index = {out.size(), index.size(), index.size(), XXH3_64bits(index.data(), index.size()), ptwm::Codec::raw};
    out.insert(out.end(), index.begin(), index.end());
    ptwm::encode_superblock(sb, std::span<uint8_t, ptwm::kSuperblockBytes>(out.data(), ptwm::kSuperblockBytes));
    write_file(out_path, out);
    ptwm::StoreReader::open(out_path);  // must still be a valid store
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 4 && std::string(argv[1]) == "--raw-sections") {
        write_raw_sections(argv[2], argv[3]);
        return 0;
    }
    if (argc != 2) {
        std::fprintf(stderr,
                     "usage: gen_seeds OUTDIR (with OUTDIR/st and OUTDIR/planes existing)\n"
                     "       gen_seeds --raw-sections STORE OUT\n");
        return 2;
    }
    const std::string out = argv[1];

    write_safetensors(out + "/st/bf16.safetensors",
                      {{"model.embed.weight", "BF16", "[64,48]", bf16(64 * 48, 0.02f)},
                       {"model.norm.weight", "F32", "[96]", f32(96, 0.05f)},
                       {"model.mask", "BOOL", "[40]", std::vector<uint8_t>(40, 1)}},
                      "{\"format\":\"pt\"}");
    write_safetensors(out + "/st/low_precision.safetensors",
                      {{"w.fp8", "F8_E4M3", "[64,64]", small_ints(4096, 12)},
                       {"w.e5m2", "F8_E5M2", "[1024]", small_ints(1024, 20)},
                       {"w.fp4", "F4", "[2,1024]", random_bytes(1024)},
                       {"w.scale", "F8_E8M0", "[2048]", scales(2048)},
                       {"empty", "F16", "[0,4]", {}}});
    write_safetensors(out + "/st/ints.safetensors",
                      {{"ids", "I64", "[300]", small_ints(2400, 2)},
                       {"counts", "U32", "[512]", small_ints(2048, 30)},
                       {"noise", "U8", "[777]", random_bytes(777)},
                       {"pairs", "C64", "[64]", f32(128, 0.5f)},
                       {"wide", "F64", "[33]", random_bytes(264)}});

    // Chunk seeds: each decomposition as the encoder picks codecs for it...
    struct Sample {
        const char* name;
        ptwm::Decomposition d;
        std::vector<uint8_t> bytes;
    };
    const std::vector<Sample> samples = {
        {"stream", ptwm::Decomposition::stream, small_ints(3000, 10)},
        {"split2", ptwm::Decomposition::split2, bf16(1500, 1.0f)},
        {"split4", ptwm::Decomposition::split4, f32(700, 0.1f)},
        {"split8", ptwm::Decomposition::split8, small_ints(2048, 4)},
        {"bf16", ptwm::Decomposition::bf16_exponent, bf16(2048, 0.02f)},
        {"f32", ptwm::Decomposition::f32_exponent, f32(1024, 0.01f)},
        {"e4m3", ptwm::Decomposition::f8e4m3_exponent, small_ints(3001, 12)},
        {"e5m2", ptwm::Decomposition::f8e5m2_exponent, small_ints(2000, 30)},
        {"nibble", ptwm::Decomposition::nibble_split, random_bytes(999)},
    };
    for (const auto& s : samples)
        for (int level : {1, 9}) {
            const auto chunk = ptwm::encode_chunk(s.bytes, s.d, {level});
            write_plane_seed(out + "/planes/" + s.name + "_l" + std::to_string(level), chunk.entry, chunk.payload);
        }
    // ...and one plane per codec, forced, so every decoder has a valid seed
    // (the encoder's contest would not pick rans1 or zstd for small planes).
    // 16,000 bytes: the 32-state rANS layout (from 11,200) and under the
    // target's largest size (16 KiB), so the exact length it asks for is the
    // seed's (drawn as 20,000 and cut, so the seeds after it stay the same).
    auto plane = scales(20000);
    plane.resize(16000);
    const auto small = scales(500);    // the 4-state layout
    // rans2 codes at most 16 values: the same scales, clamped (no draws, so
    // the seeds after these stay the same).
    const auto sixteen = [](std::vector<uint8_t> b) {
        for (auto& x : b) x = std::clamp<uint8_t>(x, 114, 129);
        return b;
    };
    struct Forced {
        const char* name;
        ptwm::Codec codec;
        std::vector<uint8_t> bytes;
    };
    const std::vector<Forced> forced = {{"raw", ptwm::Codec::raw, small},
                                        {"constant", ptwm::Codec::constant, std::vector<uint8_t>(300, 7)},
                                        {"zstd", ptwm::Codec::zstd, plane},
                                        {"rans0", ptwm::Codec::rans0, small},
                                        {"rans0_x32", ptwm::Codec::rans0, plane},
                                        {"rans1", ptwm::Codec::rans1, small},
                                        {"rans1_x32", ptwm::Codec::rans1, plane},
                                        {"rans2", ptwm::Codec::rans2, sixteen(small)},
                                        {"rans2_x32", ptwm::Codec::rans2, sixteen(plane)},
                                        {"bit_pack", ptwm::Codec::bit_pack, sixteen(small)},
                                        {"bit_pack_wide", ptwm::Codec::bit_pack, small}};
    for (const auto& [name, codec, bytes] : forced) {
        ptwm::ChunkEntry e;
        e.decomposition = ptwm::Decomposition::stream;
        e.plane_count = 1;
        e.original_length = static_cast<uint32_t>(bytes.size());
        e.codec[0] = codec;
        const auto payload = ptwm::encode_with(codec, bytes);
        e.payload_length[0] = static_cast<uint32_t>(payload.size());
        write_plane_seed(out + "/planes/codec_" + name, e, payload);
    }
    // The adaptive coder and the context models, each under the layout it
    // was coded with (the target's kShapes: 2 is [16,64], 3 is [3,3,8,16],
    // 4 is [40,64]); under 1 KiB, the most the target asks of them.
    struct Modelled {
        const char* name;
        ptwm::Codec codec;
        uint8_t shape_index;
        std::vector<uint64_t> shape;
        std::vector<uint8_t> bytes, block_scales;
    };
    const auto fp4_scales = scales(60);
    const std::vector<Modelled> modelled = {
        {"adaptive", ptwm::Codec::adaptive, 0, {}, small_ints(900, 6), {}},
        {"scale_model", ptwm::Codec::scale_model, 2, {16, 64}, scales(960), {}},
        {"f8_model", ptwm::Codec::f8_model, 3, {3, 3, 8, 16}, small_ints(1008, 12), {}},
        {"fp4_model", ptwm::Codec::fp4_model, 4, {40, 64}, random_bytes(960), fp4_scales},
        {"fp4_tables", ptwm::Codec::fp4_tables, 4, {40, 64}, random_bytes(960), fp4_scales},
        {"scale_mix", ptwm::Codec::scale_mix, 2, {16, 64}, scales(960), {}},
        {"scale_mix_e4m3", ptwm::Codec::scale_mix, 4, {40, 64}, small_ints(960, 12), {}},
    };
    for (const auto& m : modelled) {
        ptwm::ChunkEntry e;
        e.decomposition = ptwm::Decomposition::stream;
        e.plane_count = 1;
        e.original_length = static_cast<uint32_t>(m.bytes.size());
        e.codec[0] = m.codec;
        const auto payload = ptwm::encode_with(m.codec, m.bytes, 3, {m.shape, 0, std::nullopt, m.block_scales});
        e.payload_length[0] = static_cast<uint32_t>(payload.size());
        write_plane_seed(out + "/planes/codec_" + m.name, e, payload, 0, m.shape_index, m.block_scales);
    }
    // FP4 chunks with their block scales: grouped by scale (MXFP4, NVFP4)
    // and modelled (MXFP4 through the FP4 model).
    struct Grouped {
        const char* name;
        ptwm::Decomposition d;
        std::vector<uint8_t> bytes, block_scales;
        int level;
        unsigned split = 0;  // fp4-tables' split layout: streams (from 64 KiB; here from 2 KiB)
    };
    const std::vector<Grouped> grouped = {
        {"fp4_mx_grouped", ptwm::Decomposition::fp4_mx_grouped, random_bytes(2048), scales(128), 3},
        {"fp4_nv_grouped", ptwm::Decomposition::fp4_nv_grouped, random_bytes(2048), small_ints(256, 12), 3},
        {"fp4_mx_modelled", ptwm::Decomposition::fp4_mx_modelled, random_bytes(960), fp4_scales, 9},
        // (Chunks under 4 KiB are also coded as a stream, and kept as one
        // where that is smaller: these hold values fp4-tables codes smaller.)
        {"fp4_mx_tabled", ptwm::Decomposition::fp4_mx_tabled, fp4_values(2048), scales(128), 3},
        {"fp4_nv_tabled", ptwm::Decomposition::fp4_nv_tabled, fp4_values(2048), small_ints(256, 12), 3},
        // From 4 KiB: the wide layout (32 states holding the last values).
        {"fp4_mx_tabled_wide", ptwm::Decomposition::fp4_mx_tabled, random_bytes(4096), scales(256), 3},
        {"fp4_nv_tabled_wide", ptwm::Decomposition::fp4_nv_tabled, random_bytes(4096), small_ints(512, 12), 3},
        // Wide streams over parts of the blocks: four (MX), two (NV).
        {"fp4_mx_tabled_split", ptwm::Decomposition::fp4_mx_tabled, random_bytes(8192), scales(512), 3, 4},
        {"fp4_nv_tabled_split", ptwm::Decomposition::fp4_nv_tabled, random_bytes(4096), small_ints(512, 12), 3, 2},
    };
    for (const auto& g : grouped) {
        const std::vector<uint64_t> shape = {40, 64};
        ptwm::fp4tables::split_from(g.split ? 2048 : 0, g.split);
        const auto chunk = ptwm::encode_chunk(g.bytes, g.d, {g.level}, g.block_scales, {shape, 0, std::nullopt, {}});
        write_plane_seed(out + "/planes/" + g.name, chunk.entry, chunk.payload, 0, 4, g.block_scales);
        // The wide layouts through the other decoders as well.
        if (g.bytes.size() >= 4096) {
            write_plane_seed(out + "/planes/" + g.name + "_avx2", chunk.entry, chunk.payload, 1, 4, g.block_scales);
            write_plane_seed(out + "/planes/" + g.name + "_avx2_loads", chunk.entry, chunk.payload, 2, 4, g.block_scales);
            write_plane_seed(out + "/planes/" + g.name + "_scalar", chunk.entry, chunk.payload, 3, 4, g.block_scales);
        }
        // The wide layouts also with four-byte final states (stores written
        // before packed states), which readers still decode.
        if (g.bytes.size() >= 4096 && g.d == ptwm::Decomposition::fp4_mx_tabled) {
            ptwm::fp4tables::write_packed_states(false);
            const auto words = ptwm::encode_chunk(g.bytes, g.d, {g.level}, g.block_scales, {shape, 0, std::nullopt, {}});
            ptwm::fp4tables::write_packed_states(true);
            write_plane_seed(out + "/planes/" + g.name + "_words_states", words.entry, words.payload, 0, 4, g.block_scales);
        }
        ptwm::fp4tables::split_from(0);
    }
    // f8-tables with column classes, with coded signs, wide and with signs in
    // the states: FP8-like bytes
    // (a geometric exponent per column level, uniform mantissa and sign).
    std::vector<uint8_t> fp8(64 * 40);
    for (size_t i = 0; i < fp8.size(); ++i)
        fp8[i] = static_cast<uint8_t>((i * 7919 % 2 ? 0x80 : 0) | std::min<size_t>(15, 3 + i % 64 / 16 + i * 31 % 5) << 3 |
                                      i * 13 % 8);
    const std::vector<uint64_t> shape = {40, 64};
    for (const auto& [name, choice] : {std::pair{"classes", ptwm::f8tables::Choice{2, 12, false}},
                                       std::pair{"signs", ptwm::f8tables::Choice{0, 10, true}},
                                       // 32 states: the SIMD decoder's rounds, then its byte-by-byte tail
                                       std::pair{"wide", ptwm::f8tables::Choice{2, 12, false, true}},
                                       // states that start from the last signs: 32 and 64 of them
                                       std::pair{"state_signs", ptwm::f8tables::Choice{2, 12, false, true, true}},
                                       std::pair{"state_signs64", ptwm::f8tables::Choice{1, 11, false, true, true, true}},
                                       // classes per row
                                       std::pair{"row_classes", ptwm::f8tables::Choice{2, 12, false, true, true, false, true}}}) {
        ptwm::ChunkEntry e;
        e.decomposition = ptwm::Decomposition::stream;
        e.plane_count = 1;
        e.original_length = static_cast<uint32_t>(fp8.size());
        e.codec[0] = ptwm::Codec::f8_tables;
        const auto payload = ptwm::f8tables::encode_with(fp8, {shape, 0, ptwm::DType::F8_E4M3, {}}, choice);
        e.payload_length[0] = static_cast<uint32_t>(payload.size());
        write_plane_seed(out + "/planes/codec_f8_tables_" + name, e, payload);
        // Four-byte final states (stores written before packed states).
        if ((choice.log2_classes == 2 && !choice.wide) || choice.sixty_four) {
            ptwm::f8tables::Choice words = choice;
            words.packed_states = false;
            const auto w = ptwm::f8tables::encode_with(fp8, {shape, 0, ptwm::DType::F8_E4M3, {}}, words);
            ptwm::ChunkEntry we = e;
            we.payload_length[0] = static_cast<uint32_t>(w.size());
            write_plane_seed(out + "/planes/codec_f8_tables_" + name + "_words_states", we, w);
        }
        // The SIMD layouts through the other decoders as well.
        if (choice.state_signs) {
            write_plane_seed(out + "/planes/codec_f8_tables_" + name + "_avx2", e, payload, 1);
            write_plane_seed(out + "/planes/codec_f8_tables_" + name + "_avx2_loads", e, payload, 2);
            write_plane_seed(out + "/planes/codec_f8_tables_" + name + "_scalar", e, payload, 3);
        }
    }
    // Coded signs that are all the same (block scales, bytes below 128): the
    // decoder takes its raw-sign loop with equal signs.
    {
        std::vector<uint8_t> positive(fp8.size());
        for (size_t i = 0; i < fp8.size(); ++i) positive[i] = fp8[i] & 0x7F;
        ptwm::ChunkEntry e;
        e.decomposition = ptwm::Decomposition::stream;
        e.plane_count = 1;
        e.original_length = static_cast<uint32_t>(positive.size());
        e.codec[0] = ptwm::Codec::f8_tables;
        const auto payload = ptwm::f8tables::encode_with(positive, {shape, 0, ptwm::DType::F8_E4M3, {}}, {1, 10, true});
        e.payload_length[0] = static_cast<uint32_t>(payload.size());
        write_plane_seed(out + "/planes/codec_f8_tables_constant_signs", e, payload);
    }
    return 0;
}
