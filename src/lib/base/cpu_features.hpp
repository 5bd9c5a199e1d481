// What the CPU we run on can do, asked once: every SIMD kernel picks its
// variant at run time from these, so one binary serves AVX-512, AVX2 and
// older x86-64 hosts alike.
#pragma once

#include <atomic>

namespace ptwm::cpu {

// Each asks once. __builtin_cpu_init first: a caller may run before the
// constructors that would otherwise initialise GCC's CPU model.
inline bool cpu_supports_init() {
    __builtin_cpu_init();
    return true;
}

// AVX-512 F, BW and VL: the subsets our AVX-512 kernels (and htscodecs')
// use. Every CPU with BW has VL, so asking for it costs no host.
inline bool has_avx512() {
    static const bool yes = cpu_supports_init() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                            __builtin_cpu_supports("avx512vl");
    return yes;
}

inline bool has_avx2() {
    static const bool yes = cpu_supports_init() && __builtin_cpu_supports("avx2");
    return yes;
}

inline bool has_ssse3() {
    static const bool yes = cpu_supports_init() && __builtin_cpu_supports("ssse3");
    return yes;
}

// A codec's SIMD switch: what the CPU has, capped by what tests allow, so
// that they can run the AVX2 and scalar paths on an AVX-512 host and
// compare their output.
class SimdGate {
public:
    bool avx512() const { return has_avx512() && allowed_.load(std::memory_order_relaxed) >= 2; }
    bool avx2() const { return has_avx2() && allowed_.load(std::memory_order_relaxed) >= 1; }

    // allow_simd(false): scalar only; allow_avx512(false): AVX2 at most.
    void allow_simd(bool allowed) { allowed_.store(allowed ? 2 : 0, std::memory_order_relaxed); }
    void allow_avx512(bool allowed) { allowed_.store(allowed ? 2 : 1, std::memory_order_relaxed); }

private:
    std::atomic<int> allowed_{2};
};

}  // namespace ptwm::cpu
