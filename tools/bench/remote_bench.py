#!/usr/bin/env python3
"""Cold load of a packed checkpoint from an object store through a 1 Gbit/s
link: the ptwmfs mount against fetching the raw files with parallel range
GETs, and a second load from the disk cache.

The link is a veth pair into a network namespace made here, shaped with
tc tbf at --rate (1gbit) in both directions; the object store is SeaweedFS
(master, two volume servers, filer, S3 gateway) listening on the host end
of the pair, and every client runs inside the namespace. Only link-local
addresses on this machine are used (169.254.213.1/30 and .2), and
everything is torn down at the end. Needs root, iproute2, curl, and weed
(tools/install-seaweedfs.sh).

usage: python3 tools/bench/remote_bench.py [--copies N] [--rounds R] [--rate 1gbit] [SRC_DIR]
SRC_DIR defaults to ../shared/corpus; --copies repeats its safetensors
files to make the checkpoint larger (default 4).
"""
import argparse
import concurrent.futures
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "remote"))
import remote_testlib as rt  # noqa: E402

HOST_IP, NS_IP = "169.254.213.1", "169.254.213.2"
TOOL = os.environ.get("PTWMFS_TOOL", str(ROOT / "build" / "tools" / "ptwmfs-tool" / "ptwmfs-tool"))
DAEMON = os.environ.get("PTWMFS", str(ROOT / "build" / "src" / "fs" / "ptwmfs"))


def sh(*args, check=True, **kw):
    return subprocess.run([str(a) for a in args], check=check, capture_output=True, text=True, **kw)


class Link:
    """veth host <-> namespace, tbf-shaped both ways."""

    def __init__(self, rate):
        self.ns = f"ptwmbench{os.getpid()}"
        self.host_if, self.ns_if = f"pwb{os.getpid() % 100000}h", f"pwb{os.getpid() % 100000}n"
        self.rate = rate

    def __enter__(self):
        try:
            sh("ip", "netns", "add", self.ns)
            sh("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
            sh("ip", "link", "set", self.ns_if, "netns", self.ns)
            sh("ip", "addr", "add", f"{HOST_IP}/30", "dev", self.host_if)
            sh("ip", "link", "set", self.host_if, "up")
            self.run("ip", "addr", "add", f"{NS_IP}/30", "dev", self.ns_if)
            self.run("ip", "link", "set", self.ns_if, "up")
            self.run("ip", "link", "set", "lo", "up")
            for dev, inside in ((self.host_if, False), (self.ns_if, True)):
                cmd = ["tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", self.rate, "burst", "1mb",
                       "latency", "50ms"]
                self.run(*cmd) if inside else sh(*cmd)
        except BaseException:
            self.__exit__()
            raise
        return self

    def run(self, *args, **kw):
        return sh("ip", "netns", "exec", self.ns, *args, **kw)

    def __exit__(self, *exc):
        sh("ip", "link", "del", self.host_if, check=False)
        sh("ip", "netns", "del", self.ns, check=False)


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def tree_bytes(d):
    return sum(p.stat().st_size for p in Path(d).rglob("*") if p.is_file() and not p.is_symlink())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src", nargs="?", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--parallel", type=int, default=16, help="range GETs in flight for the raw peer")
    args = ap.parse_args()
    if not rt.weed_path():
        sys.exit(rt.WEED_MISSING)
    work = Path(tempfile.mkdtemp(prefix="ptwm-remote-bench-"))
    try:
        model = work / "model"
        model.mkdir()
        for i in range(args.copies):
            for f in sorted(Path(args.src).glob("*.safetensors")):
                os.link(f, model / f"{i}-{f.name}") if os.stat(f).st_dev == os.stat(work).st_dev else \
                    shutil.copy(f, model / f"{i}-{f.name}")
        original = tree_bytes(model)
        with Link(args.rate) as link, rt.SeaweedFS(ip=HOST_IP) as s3:
            env = s3.env()
            s3.make_bucket("bench")
            sh(TOOL, "pack", "-q", model, "s3://bench/packed", env=env)
            packed = sum(int(x) for x in [0])  # filled below from the manifest sizes
            import json
            manifest = json.loads(sh("curl", "-sS", "--aws-sigv4", f"aws:amz:{rt.REGION}:s3", "--user",
                                     f"{rt.ACCESS_KEY}:{rt.SECRET_KEY}",
                                     f"{s3.endpoint}/bench/packed/ptwmfs-manifest.json").stdout)
            packed = sum(e.get("size", 0) for e in manifest["entries"])
            raw_names = sorted(p.name for p in model.iterdir())
            for name in raw_names:  # the raw peer's objects
                sh("curl", "-sS", "-f", "-X", "PUT", "--aws-sigv4", f"aws:amz:{rt.REGION}:s3", "--user",
                   f"{rt.ACCESS_KEY}:{rt.SECRET_KEY}", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                   "-T", model / name, f"{s3.endpoint}/bench/raw/{name}")
            want = {n: hashlib.sha256((model / n).read_bytes()).hexdigest() for n in raw_names}
            inner = work / "inner.py"
            inner.write_text(INNER)
            results = {"mount cold": [], "mount from disk cache": [], "raw range GETs": []}
            for r in range(args.rounds):
                for what in ("raw", "mount"):  # interleaved
                    drop_caches()
                    out = link.run(sys.executable, inner, what, s3.endpoint, DAEMON, work / f"cache{r}",
                                   str(args.parallel), *raw_names, env=env, timeout=3600).stdout
                    lines = dict(line.split("=", 1) for line in out.split() if "=" in line)
                    if what == "raw":
                        results["raw range GETs"].append(float(lines["seconds"]))
                    else:
                        results["mount cold"].append(float(lines["cold"]))
                        results["mount from disk cache"].append(float(lines["warm"]))
                        bad = [n for n in raw_names if lines.get(n) != want[n]]
                        if bad:
                            sys.exit(f"mismatch through the mount: {bad}")
        print(f"checkpoint: {len(raw_names)} files, {original / 1e6:.1f} MB original, {packed / 1e6:.1f} MB packed "
              f"(size ratio {packed / original:.4f}); link {args.rate} (tc tbf, veth into a netns); "
              f"{args.rounds} rounds, median [min-max]")
        print("| load | seconds | MB/s of original | time vs raw |")
        print("|---|---:|---:|---:|")
        raw_median = statistics.median(results["raw range GETs"])
        for name, times in results.items():
            m = statistics.median(times)
            print(f"| {name} | {m:.2f} [{min(times):.2f}-{max(times):.2f}] | {original / 1e6 / m:.0f} | {m / raw_median:.3f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


# Runs inside the namespace: "raw": parallel range GETs of every raw object
# (curl, SigV4), timed; "mount": mount s3://bench/packed over an empty disk
# cache, read every file (sha256), unmount, drop caches, mount again over the
# now-full disk cache and read again.
INNER = r'''
import concurrent.futures, hashlib, os, subprocess, sys, tempfile, time, select
what, endpoint, daemon, cache, parallel, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6:]
creds = f"{os.environ['AWS_ACCESS_KEY_ID']}:{os.environ['AWS_SECRET_ACCESS_KEY']}"
def curl(*a):
    return subprocess.run(["curl", "-sS", "-f", "--aws-sigv4", f"aws:amz:{os.environ['AWS_REGION']}:s3", "--user", creds,
                           "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", *a], check=True, capture_output=True)
if what == "raw":
    sizes = {n: int([l for l in curl("-I", f"{endpoint}/bench/raw/{n}").stdout.decode().splitlines()
                     if l.lower().startswith("content-length")][0].split(":")[1]) for n in names}
    part = 8 << 20
    jobs = [(n, at) for n in names for at in range(0, sizes[n], part)]
    # One curl, `parallel` range GETs in flight on kept-alive connections.
    cmd = ["curl", "-sS", "-f", "--parallel", "--parallel-max", str(parallel), "-w", "%{size_download}\n"]
    for i, (n, at) in enumerate(jobs):
        if i:
            cmd.append("--next")
        cmd += ["--aws-sigv4", f"aws:amz:{os.environ['AWS_REGION']}:s3", "--user", creds,
                "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-o", "/dev/null",
                "-r", f"{at}-{min(at + part, sizes[n]) - 1}", f"{endpoint}/bench/raw/{n}"]
    start = time.monotonic()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    seconds = time.monotonic() - start
    got = sum(int(x) for x in out.split())
    print(f"seconds={seconds:.3f} bytes={got}")
    sys.exit(0)
def load(verify=False):
    mnt = tempfile.mkdtemp()
    r, w = os.pipe()
    p = subprocess.Popen([daemon, "s3://bench/packed", mnt, "-f", "-o", f"auto_unmount,ready_fd={w},disk_cache={cache},disk_cache_size=64G"], pass_fds=(w,))
    os.close(w)
    select.select([r], [], [], 120); os.read(r, 1)
    start = time.monotonic()
    # Timed: read every byte, as a loader does (the raw peer hashes nothing either).
    def read(n):
        with open(os.path.join(mnt, n), "rb", buffering=0) as f:
            buf = bytearray(4 << 20)
            while f.readinto(buf): pass
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(read, names))
    seconds = time.monotonic() - start
    sums = {}
    if verify:  # untimed: the bytes through the mount are the originals
        for n in names:
            h = hashlib.sha256()
            with open(os.path.join(mnt, n), "rb") as f:
                while b := f.read(4 << 20): h.update(b)
            sums[n] = h.hexdigest()
    subprocess.run(["fusermount3", "-u", mnt]); p.wait(60); os.rmdir(mnt)
    return seconds, sums
cold, _ = load()
os.sync(); open("/proc/sys/vm/drop_caches", "w").write("3\n")
warm, sums = load(verify=True)
print(f"cold={cold:.3f} warm={warm:.3f}")
for n, s in sums.items(): print(f"{n}={s}")
'''

if __name__ == "__main__":
    main()
