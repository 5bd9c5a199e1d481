#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds, and runs the unit,
# command-line and real-mount tests (plus the sanitizer builds and a short
# fuzzing round where their scripts exist).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build
meson test -C build --print-errorlogs
if [ -x .ci/sanitizers.sh ]; then bash .ci/sanitizers.sh; fi
if [ -x .ci/fuzz.sh ]; then bash .ci/fuzz.sh; fi
