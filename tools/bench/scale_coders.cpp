// scale_coders: the block scale coders side by side on the scale tensors of
// microscaling safetensors files (MXFP4 E8M0 / NVFP4 E4M3): per file, the
// sum over scale tensors of the contest's payload at the default level (where
// scale-mix is not tried; "mix" is scale-mix forced, the column after it the
// smaller of that and the contest's payload, as level 7 picks it),
// of each coder forced, of the order-0 bound and of zstd -19, and of the
// per-tensor smaller of bound and zstd -19 (the target of issue 13).
// A bench of issue 13, built by hand (not part of the meson build):
//
//   g++ -std=c++20 -O2 -march=x86-64-v2 -Iinclude -Isrc/lib tools/bench/scale_coders.cpp \
//       build/src/lib/libptwm.a build/src/lib/libxxh3_*.a -lzstd -lxxhash -lhtscodecs -lpthread -o /tmp/scale_coders
//   /tmp/scale_coders [-v] FILE...
//
// -v: one line a scale tensor. Per file it also prints what scale-mix would
// trade at the default level: the bytes it saves where it is smaller than
// the contest's payload, the decode time it adds there, and the fetch
// bandwidth below which that pays back in load time (their ratio).
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ptwm/base/file_io.hpp"
#include "ptwm/codecs/codec.hpp"
#include "ptwm/store/safetensors.hpp"
#include "ptwm/store/scale_pairs.hpp"

using namespace ptwm;

namespace {

// Calls fn(scale tensor, its bytes, its layout) for every FP4 pair's scales.
template <class Fn>
void for_each_scale_tensor(const SafetensorsHeader& h, std::span<const uint8_t> file, Fn fn) {
    for (const auto& pair : find_scale_pairs(h)) {
        if (!pair) continue;
        const TensorInfo& s = h.tensors[pair->scale_tensor];
        fn(s, file.subspan(s.begin, s.size()), TensorLayout{s.shape, 0, s.dtype, {}, true});
    }
}

size_t zstd19(std::span<const uint8_t> b) {
    std::vector<uint8_t> z(ZSTD_compressBound(b.size()));
    const size_t r = ZSTD_compress(z.data(), z.size(), b.data(), b.size(), 19);
    return ZSTD_isError(r) ? b.size() : r;
}

}  // namespace

int main(int argc, char** argv) {
    bool verbose = false;
    const Codec forced[] = {Codec::scale_model, Codec::f8_tables, Codec::scale_mix};
    constexpr size_t kForced = std::size(forced);
    std::printf("%-36s %8s | %7s %7s %7s %7s | %7s %7s %7s | %s\n", "file", "bytes", "ours", "bound", "zstd19", "min(b,z)",
                "scmodel", "f8tab", "mix", "tensors above min(b,z)");
    for (int a = 1; a < argc; ++a) {
        if (std::strcmp(argv[a], "-v") == 0) {
            verbose = true;
            continue;
        }
        const auto file = read_whole_file(argv[a]);
        const SafetensorsHeader h = parse_safetensors(file, file.size(), argv[a]);
        double withx = 0, bytes = 0, ours = 0, bound = 0, zs = 0, target = 0, f[kForced] = {};
        int above = 0, count = 0;
        std::vector<EncodedPlane> contest;  // each scale tensor's payload at the default level
        for_each_scale_tensor(h, file, [&](const TensorInfo& s, std::span<const uint8_t> sc, const TensorLayout& layout) {
            const EncodedPlane& e = contest.emplace_back(encode_plane(sc, EncodeOptions{}, &layout));
            const double b = order0_bits(sc) / 8, z = static_cast<double>(zstd19(sc));
            bytes += static_cast<double>(sc.size());
            ours += static_cast<double>(e.payload.size());
            bound += b;
            zs += z;
            target += std::min(b, z);
            ++count;
            const bool over = static_cast<double>(e.payload.size()) > std::min(b, z);
            above += over;
            double sz[kForced];
            for (size_t k = 0; k < kForced; ++k) {
                sz[k] = static_cast<double>(sc.size());
                try {
                    const auto pl = encode_with(forced[k], sc, 19, layout);
                    sz[k] = static_cast<double>(pl.size());
                    std::vector<uint8_t> back(sc.size());
                    decode_plane(forced[k], pl, back, layout);
                    if (!std::equal(back.begin(), back.end(), sc.begin())) std::printf("ROUND TRIP FAILED\n");
                } catch (const std::exception&) {
                }
                f[k] += sz[k];
            }
            withx += std::min(sz[2], static_cast<double>(e.payload.size()));
            if (verbose) {
                std::string shape;
                for (uint64_t d : s.shape) shape += (shape.empty() ? "" : "x") + std::to_string(d);
                std::printf("  %-50.50s %-10s %7zu | %7zu %7.1f %7.0f %s | %7.0f %7.0f %7.0f %s\n", s.name.c_str(),
                            shape.c_str(), sc.size(), e.payload.size(), b, z, std::string(name(e.codec)).c_str(), sz[0],
                            sz[1], sz[2], over ? "ABOVE" : "");
            }
        });
        // One-thread decode speed of every scale tensor under scale-mix and
        // under order-0 rANS, MB/s of scale bytes, best of 5.
        double mbs[2] = {};
        std::vector<std::pair<std::vector<uint8_t>, std::vector<uint8_t>>> coded[2];  // payload, plane
        std::vector<TensorLayout> layouts;
        {
            const Codec cs[2] = {Codec::scale_mix, Codec::rans0};
            for_each_scale_tensor(h, file, [&](const TensorInfo&, std::span<const uint8_t> sc, const TensorLayout& layout) {
                layouts.push_back(layout);
                for (int k = 0; k < 2; ++k) coded[k].emplace_back(encode_with(cs[k], sc, 3, layout), std::vector<uint8_t>(sc.size()));
            });
            for (int k = 0; k < 2; ++k) {
                double best = 1e9;
                for (int rep = 0; rep < 5; ++rep) {
                    const auto t0 = std::chrono::steady_clock::now();
                    for (size_t i = 0; i < coded[k].size(); ++i) decode_plane(cs[k], coded[k][i].first, coded[k][i].second, layouts[i]);
                    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
                }
                mbs[k] = bytes / best / 1e6;
            }
        }
        std::printf("decode MB/s of the scale bytes: scale-mix %.1f, rans0 %.1f\n", mbs[0], mbs[1]);
        // What scale-mix at the default level would trade: on the tensors
        // where it is smaller than the contest's payload, the bytes it saves
        // against the decode time it adds (one thread, best of 5 a tensor).
        // Their ratio is the fetch bandwidth below which it pays back in load
        // time.
        {
            double saved = 0, added = 0;
            for (size_t i = 0; i < contest.size(); ++i) {
                const EncodedPlane& e = contest[i];
                auto& [mix, back] = coded[0][i];  // scale-mix's payload and a plane to decode into
                if (mix.size() >= e.payload.size()) continue;
                auto best = [&](Codec c, std::span<const uint8_t> payload) {
                    double t = 1e9;
                    for (int rep = 0; rep < 5; ++rep) {
                        const auto t0 = std::chrono::steady_clock::now();
                        decode_plane(c, payload, back, layouts[i]);
                        t = std::min(t, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
                    }
                    return t;
                };
                saved += static_cast<double>(e.payload.size() - mix.size());
                added += best(Codec::scale_mix, mix) - best(e.codec, e.payload);
            }
            std::printf("scale-mix where smaller: %.0f bytes saved, %.2f ms of decode added: pays back below %.2f MB/s\n",
                        saved, added * 1e3, added > 0 ? saved / added / 1e6 : 0.0);
        }
        std::string fname = argv[a];
        fname = fname.substr(fname.find_last_of('/') + 1);
        std::printf("%-36.36s %8.0f | %.4f %.4f %.4f %.4f | %.4f %.4f %.4f | %.4f | %d of %d %s\n", fname.c_str(), bytes,
                    ours / bytes, bound / bytes, zs / bytes, target / bytes, f[0] / bytes, f[1] / bytes, f[2] / bytes, withx / bytes,
                    above, count, ours <= std::min(bound, zs) ? "ok" : "ABOVE");
    }
}
