#!/usr/bin/python3
"""pack -j1 against zstd -3 -T1 on the command line, as a user runs them.

    pack_bench.py [--runs 11] [--tool PATH] [--tmp DIR] FILE...

Per file, --runs rounds, each running in turn `ptwmfs-tool pack -q -j1 FILE`,
`zstd -q -f -3 -T1 FILE`, and zstd again followed by an fsync of its output;
reported as the median of each: wall time, and CPU time (user + sys of the
child). The third column exists because pack syncs a store before it renames
it into place (a store the mount serves must not be a zero-length file after
a crash) and zstd does not: on a slow disk that fsync is a large share of a
small file's pack (some 24 ms of a 5 MB store's on a cloud VM), and zstd
followed by an fsync is the peer with the same guarantee. zstd's CLI writes
from a second thread, so its CPU time can exceed its wall time.

The ratio columns are zstd / pack (above 1: pack is the faster). Both
tools write to --tmp (default /var/tmp: a disk, not tmpfs, so that the
fsync reaches one).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(cmd, sync_path=None):
    """Wall and CPU seconds of one child, plus an fsync of sync_path after it."""
    start = time.perf_counter()
    child = subprocess.Popen(cmd)
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        sys.exit(f"pack_bench: {' '.join(cmd)} failed (status {status})")
    if sync_path:
        fd = os.open(sync_path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--tool", default=os.path.join(ROOT, "build/tools/ptwmfs-tool/ptwmfs-tool"))
    ap.add_argument("--tmp", default="/var/tmp")
    args = ap.parse_args()
    if not os.access(args.tool, os.X_OK):
        sys.exit(f"pack_bench: {args.tool}: no ptwmfs-tool there (ninja -C build, or --tool PATH)")
    with tempfile.TemporaryDirectory(dir=args.tmp, prefix="pack_bench.") as tmp:
        store, zst, zst_synced = (os.path.join(tmp, n) for n in ("out.ptwm", "out.zst", "synced.zst"))
        print(f"{'file':44s} {'pack wall':>9s} {'cpu':>6s} | {'zstd wall':>9s} {'cpu':>6s} | {'zstd+fsync':>10s} |"
              f" {'wall x':>6s} {'cpu x':>6s} {'+fsync x':>8s}   (ms, median of {args.runs})")
        for path in args.files:
            rounds = {"pack": [], "zstd": [], "zstd_fsync": []}
            for _ in range(args.runs):
                rounds["pack"].append(run([args.tool, "pack", "-q", "-j1", path, store]))
                rounds["zstd"].append(run(["zstd", "-q", "-f", "-3", "-T1", path, "-o", zst]))
                rounds["zstd_fsync"].append(run(["zstd", "-q", "-f", "-3", "-T1", path, "-o", zst_synced], zst_synced))
            wall = {k: statistics.median(r[0] for r in v) * 1e3 for k, v in rounds.items()}
            cpu = {k: statistics.median(r[1] for r in v) * 1e3 for k, v in rounds.items()}
            name = os.path.basename(path).removesuffix(".safetensors")
            print(f"{name:44s} {wall['pack']:9.1f} {cpu['pack']:6.1f} | {wall['zstd']:9.1f} {cpu['zstd']:6.1f} |"
                  f" {wall['zstd_fsync']:10.1f} | {wall['zstd'] / wall['pack']:6.2f} {cpu['zstd'] / cpu['pack']:6.2f}"
                  f" {wall['zstd_fsync'] / wall['pack']:8.2f}", flush=True)


if __name__ == "__main__":
    main()
