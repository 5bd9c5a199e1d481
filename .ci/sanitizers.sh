#!/usr/bin/env bash
# Sanitizer builds: AddressSanitizer + UndefinedBehaviorSanitizer over the
# unit, command-line and real-mount tests; ThreadSanitizer over the tests
# that exercise concurrency (the chunk cache, mounts read by many processes
# and threads at once, which drive the cache and the prefetcher, and remote
# mounts: fetch-ahead threads, shared block memory, outages mid-read).
set -euo pipefail
cd "$(dirname "$0")/.."

export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# The mount tests print their Python stacks a minute before meson's timeout
# (tests/mount/ptwmfs_testlib.py); the timeouts here are 4 x 900 s.
export PTWMFS_TEST_STACKS_AFTER=3540
[ -d build-asan ] || meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
ninja -C build-asan
meson test -C build-asan --print-errorlogs --timeout-multiplier 4

# libfuse, libcurl and htscodecs are not instrumented; TSan sees only our
# threads' accesses, which is what these tests are about.
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
[ -d build-tsan ] || meson setup build-tsan -Db_sanitize=thread -Db_lundef=false >/dev/null
ninja -C build-tsan
meson test -C build-tsan --print-errorlogs --timeout-multiplier 4 unit mount-concurrency remote-unit remote-mount
