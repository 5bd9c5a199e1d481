#!/usr/bin/env bash
# Installs the Debian packages ptwmfs builds, tests and benchmarks with, then
# the tests' pinned PyPI packages (tests/requirements.txt) into .venv.
# Idempotent, and quick when everything is there; needs root (or sudo) for apt.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
packages=(
  g++ meson ninja-build pkg-config          # build
  libzstd-dev libxxhash-dev libhtscodecs-dev nlohmann-json3-dev libfuse3-dev  # libraries
  libcurl4-openssl-dev                      # object-store sources: HTTP range reads, S3 SigV4 (CURLOPT_AWS_SIGV4)
  fuse3 zstd                                # fusermount3; the zstd CLI peer in benchmarks
  libgtest-dev                              # unit tests
  python3 python3-numpy python3-torch       # mount tests: numpy.memmap and torch mmap through the mount
  python3-venv python3-wheel python3-dev    # .venv for the pinned PyPI packages; zipnn builds from source
  iproute2 nginx-light openssl              # object-store tests: network namespaces, an HTTP(S) server, its certificate
  clang libclang-rt-14-dev                  # libFuzzer targets
  strace                                    # cli test: the calls that put a packed tree on the disk
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

# The tests' PyPI packages: a virtual environment that sees Debian's torch and
# numpy (--system-site-packages) and holds the pinned closure of
# tests/requirements.txt (--no-deps: pip resolves nothing, so never fetches
# PyPI's torch). A stamp of the requirements' and python's hash makes a second
# run a no-op; a change rebuilds the environment from scratch, so nothing
# unpinned lingers. When PyPI cannot be reached this is not an error: the
# framework tests then skip, saying so (.venv/.pypi-unreachable).
venv="$root/.venv"
requirements="$root/tests/requirements.txt"
want="$({ cat "$requirements"; /usr/bin/python3 --version; } | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$want" ] || [ ! -x "$venv/bin/python" ]; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  pip=("$venv/bin/pip" --no-input --disable-pip-version-check --timeout 30 --retries 2)
  echo "install-deps: installing tests/requirements.txt into .venv" >&2
  # --no-build-isolation: zipnn (a source package) builds with the venv's own
  # setuptools and Debian's wheel instead of fetching unpinned build tools.
  if "${pip[@]}" install -q --no-deps --no-build-isolation -r "$requirements"; then
    echo "$want" >"$venv/.requirements.sha256"
  else
    probe="$(mktemp -d)"
    if "${pip[@]}" download -q --no-deps --no-cache-dir -d "$probe" packaging==24.2 >/dev/null 2>&1; then
      rm -rf "$probe"
      echo "install-deps: pip could not install tests/requirements.txt (see above)" >&2
      exit 1
    fi
    rm -rf "$probe"
    echo "install-deps: PyPI could not be reached: the framework tests will skip" >&2
    echo "PyPI could not be reached when tools/install-deps.sh ran on $(date -u '+%Y-%m-%d %H:%M UTC'):" \
      "the pinned packages of tests/requirements.txt are not installed" >"$venv/.pypi-unreachable"
  fi
fi
