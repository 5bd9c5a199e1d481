#!/bin/sh
# Fuzz the parsers and decoders for a bounded time (CI and by hand).
#
#   .ci/fuzz.sh [TARGET...]     default: all targets
#
# Env: FUZZ_SECONDS   time per target (default 60)
#      FUZZ_OUT       build directory for the targets (default build-fuzz)
#      FUZZ_JOBS      parallel fuzzing processes per target (default 1)
#
# For each target: first replay every input under tests/fuzz/regressions/
# TARGET/ (past crashes must stay fixed), then fuzz from the committed seed
# corpus. The corpus is copied to a temporary directory first so new inputs
# the fuzzer finds never touch the repository. Exits non-zero on any crash,
# leak, sanitizer report, timeout or out-of-memory; the crashing input is
# copied to FUZZ_OUT/crashes/TARGET/ -- minimise it (fuzz_TARGET
# -minimize_crash=1 -runs=10000 INPUT) and commit it under
# tests/fuzz/regressions/TARGET/ together with the fix.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${FUZZ_SECONDS:-60}
out=${FUZZ_OUT:-$root/build-fuzz}
jobs=${FUZZ_JOBS:-1}
targets=${*:-safetensors_header store_reader plane_decoders}

"$root/tests/fuzz/build.sh" "$out"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM

# -timeout: one input taking over 10 s is a hang. -rss_limit_mb (and the
# malloc limit it implies): a small input that makes the decoder allocate
# gigabytes is a finding, not a reason for CI to run out of memory.
common="-timeout=10 -rss_limit_mb=2048 -print_final_stats=1"

status=0
for target in $targets; do
    bin=$out/fuzz_$target
    [ -x "$bin" ] || { echo "fuzz.sh: no target '$target'" >&2; exit 2; }

    regressions=$root/tests/fuzz/regressions/$target
    if [ -d "$regressions" ] && [ -n "$(ls -A "$regressions")" ]; then
        echo "== $target: replaying $(ls "$regressions" | wc -l) regression inputs"
        # Given files (not a directory), libFuzzer runs each input once.
        # shellcheck disable=SC2086
        if ! "$bin" $common "$regressions"/* >"$work/$target.replay.log" 2>&1; then
            tail -n 60 "$work/$target.replay.log"
            echo "== $target: FAILED on a regression input" >&2
            status=1
            continue
        fi
    fi

    echo "== $target: fuzzing for ${seconds}s"
    mkdir -p "$work/corpus/$target" "$out/crashes/$target"
    cp -R "$root/tests/fuzz/corpus/$target/." "$work/corpus/$target/"
    # -jobs makes libFuzzer fork workers that log to ./fuzz-N.log: run them
    # in the scratch directory, and only when asked for more than one.
    parallel=""
    [ "$jobs" -gt 1 ] && parallel="-jobs=$jobs -workers=$jobs"
    # -artifact_prefix: crash-*, leak-*, timeout-*, oom-* files land outside the repo.
    # shellcheck disable=SC2086
    if ! (cd "$work" && "$bin" $common $parallel -max_total_time="$seconds" \
        -artifact_prefix="$out/crashes/$target/" "$work/corpus/$target" >"$work/$target.log" 2>&1); then
        tail -n 60 "$work/$target.log"
        [ "$jobs" -gt 1 ] && tail -n 60 "$work"/fuzz-*.log 2>/dev/null
        echo "== $target: FAILED; inputs: $(ls "$out/crashes/$target")" >&2
        status=1
        continue
    fi
    grep -E '^stat::number_of_executed_units|^#[0-9]+ +DONE' "$work/$target.log" || true
done
exit $status
