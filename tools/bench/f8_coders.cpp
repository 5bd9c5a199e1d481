// f8_coders: the FP8 coders side by side on the F8 tensors of safetensors
// files -- sizes against the whole-byte order-0 bound, one-thread in-memory
// decode speed against libzstd level 3 decompression of the same whole file
// (zstd3d: MB/s of the whole file; the others: of the F8 bytes, 256 KiB
// chunks). f8tab: the encoder's choice (from 2 KiB the state-signs layout:
// 32 or 64 states, column or row classes). f8tab4 / f8tab32: the same class
// count and precision with column classes in the older layouts, forced to 4
// and to 32 states (the wide layout), every chunk.
// A bench of issue 13, built by hand (not part of the meson build):
//
//   g++ -std=c++20 -O2 -march=x86-64-v2 -Iinclude -Isrc/lib tools/bench/f8_coders.cpp \
//       build/src/lib/libptwm.a build/src/lib/libxxh3_*.a -lzstd -lxxhash -lhtscodecs -lpthread -o /tmp/f8_coders
//   /tmp/f8_coders FILE...
//
// Timings: best of 7 repetitions, coders interleaved within each repetition.
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "ptwm/base/file_io.hpp"
#include "ptwm/codecs/codec.hpp"
#include "ptwm/store/safetensors.hpp"
#include "codecs/f8_tables.hpp"

using namespace ptwm;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Chunk {
    std::span<const uint8_t> bytes;
    TensorLayout layout;
};

}  // namespace

int main(int argc, char** argv) {
    constexpr size_t kChunk = 256u << 10;
    const Codec coders[] = {Codec::f8_tables, Codec::rans0, Codec::rans1};
    std::printf("%-34s %6s %7s | %7s %7s %7s %7s %7s | MB/s: %6s %6s %6s %6s %6s %6s\n", "file", "F8 MB", "bound", "f8tab",
                "rans0", "rans1", "f8tab4", "f8tab32", "f8tab", "rans0", "rans1", "zstd3d", "f8tab4", "f8ta32");
    for (int a = 1; a < argc; ++a) {
        const auto file = read_whole_file(argv[a]);
        const SafetensorsHeader h = parse_safetensors(file, file.size(), argv[a]);
        std::vector<Chunk> chunks;
        double bound = 0, f8_bytes = 0;
        for (const auto& t : h.tensors) {
            if (t.dtype != DType::F8_E4M3 && t.dtype != DType::F8_E5M2) continue;
            const auto all = std::span<const uint8_t>(file).subspan(t.begin, t.size());
            bound += order0_bits(all) / 8;
            f8_bytes += static_cast<double>(all.size());
            for (size_t o = 0; o < all.size(); o += kChunk)
                chunks.push_back({all.subspan(o, std::min(kChunk, all.size() - o)), {t.shape, o, t.dtype, {}}});
        }
        // Coders 0-2 as the contest would run them; 3 and 4: f8-tables with
        // the encoder's classes and precision forced to 4 and to 32 states.
        std::vector<std::vector<std::vector<uint8_t>>> payload(5);
        double size[5] = {};
        for (int c = 0; c < 3; ++c)
            for (const auto& ch : chunks) {
                payload[c].push_back(encode_with(coders[c], ch.bytes, 3, ch.layout));
                size[c] += static_cast<double>(payload[c].back().size());
            }
        for (size_t k = 0; k < chunks.size(); ++k) {
            const auto& chosen = payload[0][k];
            const f8tables::Choice narrow{chosen[0] & 3u, chosen[1], (chosen[0] & 4) != 0, false};
            f8tables::Choice wide = narrow;
            wide.wide = !narrow.coded_signs;
            payload[3].push_back(f8tables::encode_with(chunks[k].bytes, chunks[k].layout, narrow));
            payload[4].push_back(f8tables::encode_with(chunks[k].bytes, chunks[k].layout, wide));
            size[3] += static_cast<double>(payload[3].back().size());
            size[4] += static_cast<double>(payload[4].back().size());
        }
        std::vector<uint8_t> z(ZSTD_compressBound(file.size()));
        z.resize(ZSTD_compress(z.data(), z.size(), file.data(), file.size(), 3));
        std::vector<uint8_t> out(std::max(kChunk, file.size()));
        double best[6] = {1e9, 1e9, 1e9, 1e9, 1e9, 1e9};
        ZSTD_DCtx* dctx = ZSTD_createDCtx();
        for (int rep = 0; rep < 7; ++rep) {
            for (int c = 0; c < 5; ++c) {
                const double t0 = now();
                for (size_t k = 0; k < chunks.size(); ++k)
                    decode_plane(c < 3 ? coders[c] : Codec::f8_tables, payload[c][k],
                                 std::span(out).first(chunks[k].bytes.size()), chunks[k].layout);
                best[c < 3 ? c : c + 1] = std::min(best[c < 3 ? c : c + 1], now() - t0);
            }
            const double t0 = now();
            ZSTD_decompressDCtx(dctx, out.data(), file.size(), z.data(), z.size());
            best[3] = std::min(best[3], now() - t0);
        }
        ZSTD_freeDCtx(dctx);
        std::string name = argv[a];
        name = name.substr(name.find_last_of('/') + 1);
        name = name.substr(0, name.find(".safetensors"));
        std::printf("%-34s %6.2f %7.4f | %7.4f %7.4f %7.4f %7.4f %7.4f | MB/s: %6.0f %6.0f %6.0f %6.0f %6.0f %6.0f\n",
                    name.c_str(), f8_bytes / 1e6, bound / f8_bytes, size[0] / f8_bytes, size[1] / f8_bytes,
                    size[2] / f8_bytes, size[3] / f8_bytes, size[4] / f8_bytes, f8_bytes / best[0] / 1e6,
                    f8_bytes / best[1] / 1e6, f8_bytes / best[2] / 1e6, static_cast<double>(file.size()) / best[3] / 1e6,
                    f8_bytes / best[4] / 1e6, f8_bytes / best[5] / 1e6);
    }
}
