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

usage: python3 tools/bench/remote_bench.py [--copies N | --generate-gb G [--shard-mb M]] [--rounds R]
                                           [--rate 1gbit] [--baseline DAEMON] [--verbose] [SRC_DIR]
SRC_DIR defaults to ../shared/corpus; --copies repeats its safetensors
files to make the checkpoint larger (default 4: 481 MB, a short run).
--generate-gb makes a BF16 checkpoint of that size in shards instead (the
multi-GB figures: --generate-gb 3). The cold load is timed from the
daemon's start (a mount fetches every store's superblock and index before
it is ready) to the last byte read. --baseline benches a second daemon
build, interleaved, to compare two builds under the same load.
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
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        sys.exit(f"{' '.join(str(a) for a in args[:3])} ... failed ({p.returncode}): {p.stderr[-2000:]}")
    return p


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


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(8 << 20):
            h.update(block)
    return h.hexdigest()


def tree_bytes(d):
    return sum(p.stat().st_size for p in Path(d).rglob("*") if p.is_file() and not p.is_symlink())


def generate_checkpoint(out, total_bytes, shard_bytes, seed=0):
    """A BF16 checkpoint like a trained model's: shards of 4096-wide
    matrices, each normal with its own scale (as weights are), rounded from
    float32 to bfloat16. Needs numpy."""
    import json
    import numpy as np
    rng = np.random.default_rng(seed)
    rows, cols = 2048, 4096  # 16 MiB a tensor
    tensor_bytes = rows * cols * 2
    per_shard = max(1, shard_bytes // tensor_bytes)
    count = max(1, total_bytes // tensor_bytes)
    shards = (count + per_shard - 1) // per_shard
    for s in range(shards):
        names = [f"layers.{t}.weight" for t in range(s * per_shard, min(count, (s + 1) * per_shard))]
        header, at = {}, 0
        for n in names:
            header[n] = {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [at, at + tensor_bytes]}
            at += tensor_bytes
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        with open(out / f"model-{s + 1:05d}-of-{shards:05d}.safetensors", "wb") as f:
            f.write(len(text).to_bytes(8, "little") + text)
            for _ in names:
                x = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(rng.uniform(0.005, 0.05))
                bits = x.view(np.uint32)
                bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even
                f.write(bits.astype(np.uint16).tobytes())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src", nargs="?", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--generate-gb", type=float, default=0,
                    help="bench a generated BF16 checkpoint of this many GB instead of copies of SRC_DIR")
    ap.add_argument("--shard-mb", type=int, default=512,
                    help="shard size of the generated checkpoint (the raw peer's single PUT of 1 GiB fails here)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--parallel", type=int, default=16, help="range GETs in flight for the raw peer")
    ap.add_argument("--verbose", action="store_true", help="print the mounts' -o stats")
    ap.add_argument("--baseline", help="another ptwmfs daemon to bench beside this one (interleaved)")
    args = ap.parse_args()
    if not rt.weed_path():
        sys.exit(rt.WEED_MISSING)
    work = Path(tempfile.mkdtemp(prefix="ptwm-remote-bench-"))
    try:
        model = work / "model"
        model.mkdir()
        if args.generate_gb:
            generate_checkpoint(model, int(args.generate_gb * 1e9), args.shard_mb << 20)
        for i in range(0 if args.generate_gb else args.copies):
            for f in sorted(Path(args.src).glob("*.safetensors")):
                os.link(f, model / f"{i}-{f.name}") if os.stat(f).st_dev == os.stat(work).st_dev else \
                    shutil.copy(f, model / f"{i}-{f.name}")
        original = tree_bytes(model)
        with Link(args.rate) as link, rt.SeaweedFS(ip=HOST_IP, max_volumes=max(30, int(3 * original / 64e6) + 16)) as s3:
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
            want = {n: sha256_file(model / n) for n in raw_names}
            inner = work / "inner.py"
            inner.write_text(INNER)
            results = {"raw range GETs": [], "mount cold": [], "mount from disk cache": []}
            daemons = {"mount": DAEMON}
            if args.baseline:
                daemons["baseline"] = args.baseline
                results.update({"baseline mount cold": [], "baseline mount from disk cache": []})
            for r in range(args.rounds):
                for what in ("raw", *daemons):  # interleaved
                    drop_caches()
                    cache = work / f"cache-{what}-{r}"
                    out = link.run(sys.executable, inner, "raw" if what == "raw" else "mount", s3.endpoint,
                                   daemons.get(what, DAEMON), cache, str(args.parallel), *raw_names, env=env,
                                   timeout=3600).stdout
                    lines = dict(line.split("=", 1) for line in out.split() if "=" in line)
                    if what == "raw":
                        results["raw range GETs"].append(float(lines["seconds"]))
                    else:
                        prefix = "" if what == "mount" else "baseline "
                        results[prefix + "mount cold"].append(float(lines["cold"]))
                        results[prefix + "mount from disk cache"].append(float(lines["warm"]))
                        if args.verbose:  # the daemons' -o stats (cold, then warm)
                            print(what, Path(str(cache) + ".stats").read_text(), file=sys.stderr)
                        shutil.rmtree(cache, ignore_errors=True)
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
    # Timed from the daemon's start: a mount fetches each store's superblock
    # and index (a block or two each) before it is ready, part of the load.
    start = time.monotonic()
    p = subprocess.Popen([daemon, "s3://bench/packed", mnt, "-f", "-o", f"auto_unmount,stats,ready_fd={w},disk_cache={cache},disk_cache_size=64G"],
                         pass_fds=(w,), stderr=open(cache + ".stats", "a"))
    os.close(w)
    select.select([r], [], [], 120); os.read(r, 1)
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
