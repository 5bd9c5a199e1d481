// Plane codecs: each turns one plane (a byte span) into a payload and back.
// The encoder runs a contest per plane and keeps the smallest payload, with
// near ties going to the faster decoder.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ptwm/planes/dtype.hpp"

namespace ptwm {

// Stored in every chunk entry of a store: values are part of the format.
enum class Codec : uint8_t {
    raw = 0,        // payload = the plane
    constant = 1,   // payload = one byte, repeated plane-length times
    zstd = 2,       // payload = one zstd frame
    rans0 = 3,      // order-0 rANS, 32 interleaved states (htscodecs rANS Nx16)
    rans1 = 4,      // order-1 rANS (context = previous byte), for scale tensors
    adaptive = 5,   // adaptive binary range coder: no table to store, for small planes
    scale_model = 6,  // context model for block scales (E8M0): needs the tensor's layout
    f8_model = 7,     // context model for whole FP8 E4M3 bytes: needs the tensor's layout
    fp4_model = 8,    // context model for MXFP4 blocks (decomposition 12): needs layout and block scales
    f8_tables = 9,    // static context tables for whole FP8 E4M3 bytes (column classes in the payload)
    fp4_tables = 10,  // MXFP4/NVFP4 blocks (decompositions 13, 14) under static tables picked by their
                      // scales: needs the block scales
    scale_mix = 11,   // context model for block scale tensors (E8M0 or E4M3), its contexts and value
                      // split chosen per tensor (in the payload): needs the tensor's layout
    rans2 = 12,       // order-2 rANS over at most 16 byte values (byte pairs under order 1), for the
                      // block scales of large models
    bit_pack = 13,    // each byte's distance from the plane's smallest in a fixed number of bits, for
                      // planes too small for an entropy coder's table
};

// Where a chunk's bytes sit in their tensor. The context models take their
// contexts from it, so a chunk coded with one decodes only with the same
// layout; the other codecs ignore it.
struct TensorLayout {
    std::span<const uint64_t> shape;  // the safetensors shape
    uint64_t offset = 0;              // the chunk's first byte in the tensor
    std::optional<DType> dtype;       // encoder only: which models may be tried
    std::span<const uint8_t> scales;  // the chunk's block scales (grouped decompositions)
    bool block_scales = false;        // encoder only: the tensor is an FP4 tensor's scales (scale-mix may be tried)
};

bool is_known(Codec c);
std::string_view name(Codec c);

// Codecs 6-8 and 11: adaptive context models that decode at 5-50 MB/s.
bool is_context_model(Codec c);
// They code chunks of at most this many bytes. At their speed a read of one
// 256 MiB chunk (kMaxChunkBytes) would spend half a minute in the decoder --
// a damaged or hostile index entry could ask for that --, so the format
// bounds it: a reader rejects a larger modelled chunk at open, and the
// encoder never makes one (larger chunks keep the static coders).
inline constexpr uint32_t kMaxModelledChunkBytes = 4u << 20;

// The FP8 context model decodes at about 10 MB/s, a hundred times slower
// than rANS, for 1-2% less: it is tried only from this level, where size is
// what was asked for.
inline constexpr int kContextModelLevel = 7;

struct EncodeOptions {
    int level = 3;  // ptwmfs-tool --level, 1 (fastest) .. 9 (smallest)
    // Below level 6: whether zstd may be tried at all (encode_chunk turns it
    // off for the rest of a chunk's FP4 group planes when the first one did
    // not take it: they hold the same kind of values).
    bool zstd = true;
};

struct EncodedPlane {
    Codec codec;
    std::vector<uint8_t> payload;
};

// Encode one plane with the best codec the level allows.
// `whole`: the plane is a chunk's bytes as they are (stream decomposition),
// so the context models for its dtype may be tried.
EncodedPlane encode_plane(std::span<const uint8_t> plane, const EncodeOptions& opt, const TensorLayout* whole = nullptr);
// Encode with one given codec (tests, benchmarks). Throws Error if the codec
// cannot represent the plane (constant on a plane of two values).
std::vector<uint8_t> encode_with(Codec c, std::span<const uint8_t> plane, int zstd_level = 3,
                                 const TensorLayout& layout = {});

// Decode `payload` into exactly out.size() bytes. Throws CorruptData (with a
// message that does not name the file: the caller adds where) when the
// payload is malformed or decodes to another length.
// The context models need the layout the plane was encoded with.
void decode_plane(Codec c, std::span<const uint8_t> payload, std::span<uint8_t> out, const TensorLayout& layout = {});

using Histogram = std::array<uint64_t, 256>;
void add_to_histogram(std::span<const uint8_t> bytes, Histogram& h);
// Order-0 entropy in bits of the bytes counted in `h`.
double order0_bits(const Histogram& h);

// Order-0 entropy of a byte span in bits: the bound an order-0 coder can reach.
double order0_bits(std::span<const uint8_t> bytes);

}  // namespace ptwm
