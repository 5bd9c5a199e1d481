#!/usr/bin/env bash
# README command 1: install what is needed, build, and run the demo
# (pack an example model, mount it, read it through mmap, check, report).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
/usr/bin/python3 tools/demo.py "$@"
