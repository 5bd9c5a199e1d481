// The zstd peer of the benchmarks: libzstd in process.
#pragma once

#include <zstd.h>

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

// libzstd one-shot with reused contexts, as a caller that cares would use it.
struct Zstd {
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    ZSTD_DCtx* dctx = ZSTD_createDCtx();
    Zstd() = default;
    Zstd(const Zstd&) = delete;
    Zstd& operator=(const Zstd&) = delete;
    ~Zstd() {
        ZSTD_freeCCtx(cctx);
        ZSTD_freeDCtx(dctx);
    }
    size_t compress(std::span<const uint8_t> in, std::vector<uint8_t>& out, int level) {
        out.resize(ZSTD_compressBound(in.size()));
        const size_t r = ZSTD_compressCCtx(cctx, out.data(), out.size(), in.data(), in.size(), level);
        if (ZSTD_isError(r)) throw std::runtime_error(std::string("ZSTD_compress: ") + ZSTD_getErrorName(r));
        out.resize(r);
        return r;
    }
    void decompress(std::span<const uint8_t> in, std::span<uint8_t> out) {
        const size_t r = ZSTD_decompressDCtx(dctx, out.data(), out.size(), in.data(), in.size());
        if (ZSTD_isError(r) || r != out.size()) throw std::runtime_error("ZSTD_decompress failed");
    }
};

}  // namespace bench
