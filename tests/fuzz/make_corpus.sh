#!/bin/sh
# Regenerate the committed seed corpora under tests/fuzz/corpus/ from the
# meson build (libptwm.a and ptwmfs-tool must be built: ninja -C build).
# Seeds are deterministic; rerun after a store format change.
#
#   tests/fuzz/make_corpus.sh [BUILDDIR]     default BUILDDIR: build
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
corpus=$root/tests/fuzz/corpus
tool=$build/tools/ptwmfs-tool/ptwmfs-tool
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/st" "$work/planes"
${CXX:-g++} -std=c++20 -O1 -I"$root/include" -I"$root/src/lib" "$root/tests/fuzz/gen_seeds.cpp" "$build/src/lib/libptwm.a" \
    -lzstd -lxxhash -lhtscodecs -pthread -o "$work/gen_seeds"
"$work/gen_seeds" "$work"

rm -rf "$corpus"
mkdir -p "$corpus/safetensors_header" "$corpus/store_reader" "$corpus/plane_decoders"
cp "$work"/planes/* "$corpus/plane_decoders/"
for st in "$work"/st/*.safetensors; do
    name=$(basename "$st" .safetensors)
    cp "$st" "$corpus/safetensors_header/$name.safetensors"
    # Small chunks so one store has many chunks; level 1 and 9 pick
    # different codecs (9 tries zstd and order-1 rANS on every plane).
    for level in 1 9; do
        "$tool" pack -q -j 1 --chunk-size 4K --level $level "$st" "$corpus/store_reader/${name}_l$level.ptwm"
    done
    "$work/gen_seeds" --raw-sections "$corpus/store_reader/${name}_l1.ptwm" "$corpus/store_reader/${name}_raw.ptwm"
done

# Headers that exercise the parser's edges without data: empty object,
# metadata only, a zero-size tensor.
printf '\002\000\000\000\000\000\000\000{}' >"$corpus/safetensors_header/empty_object"
printf '\042\000\000\000\000\000\000\000{"__metadata__":{"a":"b","c":"d"}}' >"$corpus/safetensors_header/metadata_only"
printf '\065\000\000\000\000\000\000\000{"z":{"dtype":"F4","shape":[0],"data_offsets":[0,0]}}' \
    >"$corpus/safetensors_header/zero_size"

find "$corpus" -type f -size +64k -exec echo "seed over 64 KiB: {}" \; -exec false {} + 
du -sh "$corpus"
