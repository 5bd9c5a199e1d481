// The XXH3-64 function body, compiled once per instruction set (meson builds
// this file with -mavx2 and with -mavx512f -mavx512bw under other names):
// xxhash.h picks its vector code from the compiler's target macros, and
// Debian's libxxhash is built for plain SSE2, three times slower than AVX2
// here (16 against 48 GB/s; AVX-512: 69 GB/s), which made the checksum an
// eighth of BF16 decode time.
//
// No C++ standard header is included: with XXH_INLINE_ALL every xxhash
// function is static to this translation unit, so no inline function
// compiled for a wider ISA can be picked by the linker for another caller.
#define XXH_INLINE_ALL
#include <xxhash.h>

#ifndef PTWM_XXH3_KERNEL
#define PTWM_XXH3_KERNEL ptwm_xxh3_generic
#endif

extern "C" unsigned long long PTWM_XXH3_KERNEL(const void* p, unsigned long n) { return XXH3_64bits(p, n); }
