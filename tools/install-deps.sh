#!/usr/bin/env bash
# Installs the Debian packages ptwmfs builds, tests and benchmarks with.
# Idempotent; needs root (or sudo).
set -euo pipefail
packages=(
  g++ meson ninja-build pkg-config          # build
  libzstd-dev libxxhash-dev libhtscodecs-dev nlohmann-json3-dev libfuse3-dev  # libraries
  libcurl4-openssl-dev                      # object-store sources: HTTP range reads, S3 SigV4 (CURLOPT_AWS_SIGV4)
  fuse3 zstd                                # fusermount3; the zstd CLI peer in benchmarks
  libgtest-dev                              # unit tests
  python3 python3-numpy python3-torch       # mount tests: numpy.memmap and torch mmap through the mount
  python3-venv                              # the tests' virtual environment for pinned PyPI packages
  iproute2 nginx-light                      # object-store tests: network namespaces, a plain HTTP server
  clang libclang-rt-14-dev                  # libFuzzer targets
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
