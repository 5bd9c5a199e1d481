// Codec 9, f8-tables: whole FP8 E4M3 bytes [S EEEE MMM] under static
// context tables -- the fast way below the bytes' order-0 entropy.
//
// An order-0 coder cannot go below a tensor's byte entropy, and pays for its
// table on top; the FP8 context model (codec 7) goes below by adapting, at
// about 10 MB/s. This codec gets there with static tables, so it decodes at
// static rANS speed: output channels differ in scale, so the columns are
// ranked by their mean exponent and cut into 1, 2, 4 or 8 classes, each with
// its own table of the 7-bit magnitude [EEEE MMM]; the tables cost a few
// bits a symbol (static_rans.hpp); the sign is a raw bit (weights are about
// as often negative as positive) unless coding it saves a twentieth.
// (Coding the exponent under its class and the mantissa under the exponent
// instead saved 0.06% on the corpus at twice the work.)
//
// The payload carries everything the decoder needs (column period, phase,
// classes, tables), so unlike codecs 6-8 it decodes without the tensor's
// layout. Any byte is a magnitude and a sign, so E5M2 tensors use it too.
// The stream has 32 states instead of 4 (the wide layout), which an AVX-512
// decoder steps 32 bytes at a time with gathers; the states start from the
// last signs (the state-signs layout), so they cost 8 bytes, not 112, and
// tables of at most 2^12 slots keep a slot in one word (one gather). In
// that layout the classes may be per row instead of per column.
// Format: man/ptwmfs-store.5.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ptwm/codecs/codec.hpp"

namespace ptwm::f8tables {

// The choices the encoder makes; tests force them to cover every path.
struct Choice {
    unsigned log2_classes = 0;  // 0..3
    unsigned prec = 14;         // table precision, srans::kMinPrec..kMaxPrec
    bool coded_signs = false;   // the sign as a coded symbol, else a raw bit
    bool wide = false;          // 32 rANS states instead of 4 (raw signs only): SIMD decoding
    bool state_signs = false;   // wide only, frequencies <= 2^12: the last signs in the start states, one-word slots
    bool sixty_four = false;    // state signs only: 64 states instead of 32
    bool row_classes = false;   // state signs and classes only: a class per row of the chunk, not per column
    bool packed_states = true;  // false: four-byte final states, as stores written before them (tests)
};

// The share of a plane f8-tables' four-state layouts must save to win the
// plane contest over a faster coder (codec.cpp says why); the encoder's own
// near ties (class count, precision) give back at most this much.
inline constexpr double kContestMargin = 0.002;

// `layout.shape` and `layout.offset` give the column period and phase.
// `byte_counts`, when given, receives the bytes' histogram, which the
// encoder counts anyway (the plane contest wants it for the order-0 bound).
std::vector<uint8_t> encode(std::span<const uint8_t> in, const TensorLayout& layout, Histogram* byte_counts = nullptr);
std::vector<uint8_t> encode_with(std::span<const uint8_t> in, const TensorLayout& layout, const Choice& choice);
void decode(std::span<const uint8_t> payload, std::span<uint8_t> out);
// Whether a payload is of a layout that decodes by SIMD where the CPU has it
// (32 or 64 states a round: some 0.9-2 GB/s a core, where the four-state
// layouts decode at 0.3-0.6).
bool simd_layout(std::span<const uint8_t> payload);
// Tests: decode the wide layout without SIMD where the CPU has it, so the
// byte-by-byte path other CPUs take is covered too (default: allowed).
void allow_simd(bool allowed);
// Tests: the state-signs layout's AVX2 decoder where the CPU has AVX-512
// (false; true again: the best the CPU has).
void allow_avx512(bool allowed);
// Tests: the state-signs decoders' gathers, lanes an instruction: AVX-512's
// 16 or 8, AVX2's 8 (vpgatherdd) or 1 (scalar loads). 0: the CPU's own
// choice (AVX-512: 16 on Intel, else 8; AVX2: 8 on Intel, else 1).
void force_gather_lanes(unsigned lanes);

}  // namespace ptwm::f8tables
