#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds, and runs the unit,
# command-line, real-mount and object-store tests (plus the sanitizer builds
# and a short fuzzing round where their scripts exist).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
# SeaweedFS for tests/remote, built through the Go module proxy beside our
# own build (it never fails the run: without it those tests skip).
bash tools/install-seaweedfs.sh > build-seaweedfs.log 2>&1 &
weed_build=$!
[ -d build ] || meson setup build >/dev/null
ninja -C build
wait "$weed_build" || true
cat build-seaweedfs.log >&2
meson test -C build --print-errorlogs
if [ -x .ci/sanitizers.sh ]; then bash .ci/sanitizers.sh; fi
if [ -x .ci/fuzz.sh ]; then bash .ci/fuzz.sh; fi
