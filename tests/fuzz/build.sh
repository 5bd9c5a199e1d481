#!/bin/sh
# Build the libFuzzer targets with clang (fuzzer + ASan + UBSan) straight from
# the library sources: the meson build uses g++ and no sanitizers, and the
# fuzz build must not depend on (or disturb) it.
#
#   tests/fuzz/build.sh [OUTDIR]     default OUTDIR: build-fuzz (in the repo root)
#
# Env: CXX (default clang++), FUZZ_EXTRA_FLAGS (appended to the compile flags).
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/build-fuzz}
CXX=${CXX:-clang++}
mkdir -p "$out/gen" "$out/obj"

# The library includes no generated header today, but the tool and daemon read
# ptwmfs_version.h; generate one so a future include in src/lib still builds.
version=$(sed -n "s/.*version *: *'\([^']*\)'.*/\1/p" "$root/meson.build" | head -n 1)
printf '#pragma once\n#define PTWMFS_VERSION "%s"\n' "${version:-0.0.0-fuzz}" >"$out/gen/ptwmfs_version.h"

# -fno-sanitize-recover: a UBSan finding must stop the run like a crash does,
# or the fuzzer would print it and carry on.
flags="-std=c++20 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
-fno-sanitize-recover=all -I$root/include -I$root/src/lib -I$out/gen ${FUZZ_EXTRA_FLAGS:-}"
libs="-lzstd -lxxhash -lhtscodecs -lpthread"

# Library objects once (-fsanitize=fuzzer-no-link: instrumented for coverage,
# but without libFuzzer's main), then one binary per target.
objs=""
# The stages the parsers and decoders live in; remote/ (libcurl, the object
# store) is not fuzzed here.
for src in "$root"/src/lib/base/*.cpp "$root"/src/lib/planes/*.cpp "$root"/src/lib/codecs/*.cpp \
    "$root"/src/lib/store/*.cpp; do
    name=$(basename "$src" .cpp)
    # The chunk cache is the daemon's, not the decoders': nothing to fuzz.
    [ "$name" = chunk_cache ] && continue
    obj="$out/obj/$name.o"
    if [ ! -e "$obj" ] || [ "$src" -nt "$obj" ] || [ "$0" -nt "$obj" ] ||
        [ -n "$(find "$root/include" "$root/src/lib" -name '*.hpp' -newer "$obj" 2>/dev/null | head -n 1)" ]; then
        # The context models (tensor_models.cpp, with the range coder of
        # context_coder.hpp inlined) compare model state, not input bytes, a
        # few times a bit: libFuzzer's comparison tracing there was over a
        # third of plane_decoders' time and gives its mutator nothing to
        # solve. They keep their edge coverage and the sanitizers.
        nocmp=""
        [ "$name" = tensor_models ] && nocmp="-fno-sanitize-coverage=trace-cmp"
        echo "CXX $src"
        # shellcheck disable=SC2086
        $CXX $(echo "$flags" | sed 's/-fsanitize=fuzzer,/-fsanitize=fuzzer-no-link,/') $nocmp -c "$src" -o "$obj"
    fi
    objs="$objs $obj"
done

for target in safetensors_header store_reader plane_decoders; do
    echo "LINK $out/fuzz_$target"
    # shellcheck disable=SC2086
    $CXX $flags "$root/tests/fuzz/fuzz_$target.cpp" $objs $libs -o "$out/fuzz_$target"
done
