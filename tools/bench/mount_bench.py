#!/usr/bin/python3
"""Mount benchmark: packs a model directory, mounts it with ptwmfs and prints
one table of, per safetensors file:

  cold    sequential read through a fresh mount, page cache dropped (MB/s)
  warm    the same read again, from the kernel page cache (MB/s)
  unpack  `ptwmfs-tool unpack` of the store to /dev/shm (MB/s)
  shm     reading that unpacked copy from tmpfs's page cache (MB/s)
  orig    reading the original file from the page cache (MB/s), on the
          file system named in the heading
  w/o     warm / orig
  4K, 1M  random read latency through a fresh mount, p50/p99: each read's
          pages dropped first, so every read reaches the daemon

    mount_bench.py [DIR] [--build BUILD_DIR] [-o MOUNT_OPTIONS]

DIR defaults to <repo>/../shared/corpus. Dropping caches needs root; without
it "cold" only means a fresh mount. Speed is measured here, never in tests.

Every page-cache read (warm, shm, orig) opens the file, reads it in 1 MiB
blocks into one reused buffer and closes it; each is the best of
PAGE_CACHE_PASSES passes, so a small file is not judged by one noisy pass.
Note: the page cache of a FUSE file is made of 4 KiB folios on kernels
without FUSE large-folio support (6.18 and earlier), as is tmpfs's by
default ("shm"), while ext4 and xfs use large folios; copying out of 4 KiB
folios is much slower, so "orig" on such a file system is out of reach
for "warm" there whatever the daemon does.
"""
import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_mount import Mounted

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BLOCK = 1 << 20
PAGE_CACHE_PASSES = 5


def drop_caches():
    try:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


_buffer = bytearray(BLOCK)


def sequential_read_seconds(path):
    view = memoryview(_buffer)
    start = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.readinto(view):
            pass
    return time.perf_counter() - start


def page_cache_read_seconds(path):
    """Best of PAGE_CACHE_PASSES sequential reads of a file already cached."""
    return min(sequential_read_seconds(path) for _ in range(PAGE_CACHE_PASSES))


def filesystem_of(path):
    """The type and mount point of the file system holding `path`."""
    path = os.path.realpath(path)
    best = ("?", "")
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            mount_point = fields[4].replace("\\040", " ")
            fs_type = fields[fields.index("-") + 1]
            inside = path == mount_point or path.startswith(mount_point.rstrip("/") + "/")
            if inside and len(mount_point) >= len(best[1]):
                best = (fs_type, mount_point)
    return best


def random_read_latencies(path, length, count, rng):
    size = os.path.getsize(path)
    latencies = []
    with open(path, "rb", buffering=0) as f:
        fd = f.fileno()
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for _ in range(count):
            offset = rng.randrange(max(1, size - length)) // 4096 * 4096
            os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
            start = time.perf_counter()
            os.pread(fd, length, offset)
            latencies.append(time.perf_counter() - start)
    latencies.sort()
    return latencies[len(latencies) // 2], latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]


def mb_per_s(size, seconds):
    return size / seconds / 1e6 if seconds > 0 else float("inf")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", nargs="?", default=os.path.normpath(os.path.join(REPO, "..", "shared", "corpus")))
    parser.add_argument("--build", default=os.path.join(REPO, "build"), help="meson build directory")
    parser.add_argument("-o", dest="options", default="", help="extra ptwmfs mount options")
    parser.add_argument("--random-reads", type=int, default=200, help="random reads per size and file")
    args = parser.parse_args()
    ptwmfs = os.path.join(args.build, "src", "fs", "ptwmfs")
    tool = os.path.join(args.build, "tools", "ptwmfs-tool", "ptwmfs-tool")

    work = tempfile.mkdtemp(prefix="ptwmfs-bench-")
    try:
        store = os.path.join(work, "store")
        subprocess.run([tool, "pack", "-q", args.dir, store], check=True)
        files = sorted(name for name in os.listdir(args.dir) if name.endswith(".safetensors"))
        dropped = drop_caches()
        if not dropped:
            print("note: cannot drop caches (not root?): 'cold' means a fresh mount only", file=sys.stderr)
        rng = random.Random(1)

        header = (f"{'file':<40} {'MB':>7} {'cold':>7} {'warm':>7} {'unpack':>7} {'shm':>7} {'orig':>7} {'w/o':>5}"
                  f" {'4K p50/p99 us':>15} {'1M p50/p99 ms':>15}")
        fs_type, mount_point = filesystem_of(args.dir)
        print(f"ptwmfs mount benchmark: {args.dir}; MB/s unless noted; options '{args.options}'")
        print(f"orig: page cache of {fs_type} mounted on {mount_point}; page-cache reads: best of {PAGE_CACHE_PASSES}")
        print(header)
        print("-" * len(header))
        for name in files:
            original = os.path.join(args.dir, name)
            size = os.path.getsize(original)

            drop_caches()
            with Mounted(ptwmfs, store, args.options) as m:
                cold = mb_per_s(size, sequential_read_seconds(os.path.join(m.path, name)))
                warm = mb_per_s(size, page_cache_read_seconds(os.path.join(m.path, name)))

            out = os.path.join("/dev/shm", f"ptwmfs-bench-{os.getpid()}.safetensors")
            start = time.perf_counter()
            subprocess.run([tool, "unpack", os.path.join(store, name + ".ptwm"), out], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            unpack = mb_per_s(size, time.perf_counter() - start)
            sequential_read_seconds(out)  # into the page cache (it is already: tmpfs)
            shm = mb_per_s(size, page_cache_read_seconds(out))
            os.unlink(out)

            sequential_read_seconds(original)  # into the page cache
            orig = mb_per_s(size, page_cache_read_seconds(original))

            drop_caches()
            with Mounted(ptwmfs, store, args.options) as m:
                path = os.path.join(m.path, name)
                p50_4k, p99_4k = random_read_latencies(path, 4096, args.random_reads, rng)
                p50_1m, p99_1m = random_read_latencies(path, 1 << 20, max(1, args.random_reads // 4), rng)

            print(f"{name:<40} {size / 1e6:7.1f} {cold:7.0f} {warm:7.0f} {unpack:7.0f} {shm:7.0f} {orig:7.0f}"
                  f" {warm / orig:5.2f}"
                  f" {p50_4k * 1e6:7.0f}/{p99_4k * 1e6:<7.0f} {p50_1m * 1e3:7.2f}/{p99_1m * 1e3:<7.2f}")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
