#!/usr/bin/env bash
# Sanitizer builds: AddressSanitizer + UndefinedBehaviorSanitizer over the
# unit, command-line and real-mount tests; ThreadSanitizer over the tests
# that exercise concurrency (the chunk cache, and mounts read by many
# processes and threads at once, which drive the cache and the prefetcher).
set -euo pipefail
cd "$(dirname "$0")/.."

export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
[ -d build-asan ] || meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
ninja -C build-asan
meson test -C build-asan --print-errorlogs --timeout-multiplier 4

# libfuse and htscodecs are not instrumented; TSan sees only our threads'
# accesses, which is what the cache and prefetcher tests are about.
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
# g++ 12's TSan runtime cannot start on some kernels' memory layouts (on
# this project's VMs every TSan binary, even an empty main, dies with
# SIGSEGV before main). Say so and skip rather than report a false failure.
probe=$(mktemp -d)
echo 'int main() { return 0; }' > "$probe/p.cpp"
if ! { g++ -fsanitize=thread "$probe/p.cpp" -o "$probe/p" && "$probe/p"; } >/dev/null 2>&1; then
  rm -rf "$probe"
  echo "sanitizers.sh: ThreadSanitizer's runtime does not start on this machine's kernel: TSan run SKIPPED"
  exit 0
fi
rm -rf "$probe"
[ -d build-tsan ] || meson setup build-tsan -Db_sanitize=thread -Db_lundef=false >/dev/null
ninja -C build-tsan
meson test -C build-tsan --print-errorlogs --timeout-multiplier 4 unit mount-concurrency
