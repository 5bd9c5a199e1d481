#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (Apache-2.0) for the object-store tests in
# tests/remote/: a master, two volume servers, a filer and the S3 gateway
# started on loopback. It comes through the Go module proxy, pinned to the
# version the proxy serves, into build-seaweedfs/bin (under /build*, ignored
# by git). Idempotent: a binary of the pinned version is kept. Never fails
# the run: without Go or the proxy the remote tests skip and say why.
#
# Usage: bash tools/install-seaweedfs.sh   -> prints the path of weed, or nothing
set -uo pipefail
cd "$(dirname "$0")/.."
version=v0.0.0-20261109003541-7506e5f91cd6
bindir="$PWD/build-seaweedfs/bin"
stamp="$bindir/weed.version"
if [ -x "$bindir/weed" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
    echo "$bindir/weed"
    exit 0
fi
go=$(command -v go || true)
[ -n "$go" ] || { [ -x /usr/local/go/bin/go ] && go=/usr/local/go/bin/go; }
if [ -z "$go" ]; then
    echo "install-seaweedfs: no Go toolchain; the remote tests will skip" >&2
    exit 0
fi
mkdir -p "$bindir"
start=$(date +%s)
log() { echo "install-seaweedfs: $*" >&2; }
# `go install module/weed@version` refuses this module (its go.mod has a
# replace directive, which only applies to a main module), so the module's
# own source comes from the proxy (`go mod download`) and is built as the
# main module, its replace and go.sum applying as upstream means them.
build() {
    local dir src
    dir=$(GOFLAGS=-mod=mod "$go" mod download -json "github.com/seaweedfs/seaweedfs@$version" |
          sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') || return 1
    [ -n "$dir" ] && [ -d "$dir/weed" ] || { log "go mod download gave no source"; return 1; }
    src="$PWD/build-seaweedfs/src"
    rm -rf "$src" && cp -r "$dir" "$src" && chmod -R u+w "$src" || return 1
    (cd "$src" && GOFLAGS="-buildvcs=false -mod=mod" nice -n 10 "$go" build -o "$bindir/weed" ./weed) || return 1
    rm -rf "$src"  # 150 MB of source, kept in Go's module cache anyway
}
log "building weed $version through the Go module proxy (once; takes minutes)"
if build >&2; then
    echo "$version" > "$stamp"
    log "built in $(( $(date +%s) - start )) s"
    echo "$bindir/weed"
else
    log "the build failed after $(( $(date +%s) - start )) s; the remote tests will skip"
    rm -f "$bindir/weed" "$stamp"
fi
exit 0
