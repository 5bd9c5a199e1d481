#!/usr/bin/python3
"""Load benchmark at checkpoint scale: a sharded BF16 (or low-precision)
checkpoint of several gigabytes, loaded cold from the raw directory and
through a ptwmfs mount of its packed stores on the same disk, interleaved.

    load_bench.py [--dtype BF16|MXFP4|NVFP4|F8_E4M3] [--layers corpus|large]
                  [--size 4G] [--shard 2G] [--runs 5] [--scratch DIR]
                  [--build BUILD_DIR] [-o MOUNT_OPTIONS] [--jobs N]
                  [--disk-rate RATE] [--keep]

The checkpoint is built in SCRATCH (default: a new directory under /work or
/tmp, the same disk as any raw model) as shards of about --shard bytes plus
model.safetensors.index.json. --dtype BF16 (the default): the BF16 corpus
tensors, repeated with noise in the two lowest mantissa bits. --dtype MXFP4,
NVFP4, F8_E4M3: the corpus' float tensors (the ORIGINAL files
derive_variants.py reads) perturbed (each output channel times exp(N(0, 0.3))
plus Gaussian noise of 0.05 of the tensor's std, seeded) and quantised with
derive_variants.py's own recipes into a pool of 16 copies, in the layouts
exporters write: MXFP4 X.blocks U8 [n, 16] + X.scales U8 (E8M0, gpt-oss);
NVFP4 X U8 + X_scale F8_E4M3 + X_scale_2 F32 (ModelOpt); F8_E4M3 X +
X_scale_inv F32 per 128x128 block (DeepSeek-V3); ndim < 2 tensors BF16.
Each repetition takes every tensor from a random pool copy and re-quantises
it exactly and cheaply: the sign of each nonzero code flipped at random, the
tensor scaled by 2^k (MXFP4: E8M0 + k, k in -1..1) or by exp(N(0, 0.2))
(NVFP4's X_scale_2, FP8's X_scale_inv), BF16 tensors' two low mantissa bits
XORed with noise (see build_lowp_checkpoint; the sign flips cost the stores
under 0.001 of ratio against none). Nothing is committed; --keep leaves it
for the next run: it is reused when its parameters (dtype, size, shard, the
recipe) match, as SCRATCH/checkpoint.key records.

Measured, raw directory against mount, each --runs times in alternating
order, page cache dropped before every cold run (needs root), reported as
median [min..max]:
  seq        cold sequential 1 MiB reads of every shard
  memmap     cold numpy memmap load touching every tensor in header order
  safetens   cold safetensors load of every tensor: safetensors.torch's
             load_file, as transformers loads (deserialize of the file's
             bytes without torch; skipped without a .venv holding
             safetensors, and for NVFP4 and F8_E4M3 checkpoints with a
             torch that has no float8_e4m3fn, as Debian's 1.13)
  warm       re-read of every shard from the page cache; the 4 KiB-page
             tmpfs limit (/dev/shm) is printed beside it
With seq and memmap, also the FUSE ceiling: the same daemon serving copies
of the raw shards from RAM (/dev/shm, as plain files: no decoding, no disk),
loaded cold the same way through its own mount in the same rounds. No FUSE
file system can load faster on this machine; when the raw disk is faster
than the ceiling, the mount cannot beat it whatever its codec (see the
README). --disk-rate RATE caps reads of the scratch's disk at RATE bytes/s
for both sides while they load (a blkio cgroup holding the benchmark, its
daemon and its loaders), as a cloud volume of that speed would: a fast
local disk hides what a slower one shows, where the mount reads fewer
bytes than the raw side.
--layers large (low-precision checkpoints): instead of the corpus' small
tensors, layers of a large model's shape (2880 x 5760, a gpt-oss expert's
gate_up_proj) cut from the corpus' trained values laid end to end, row by
row, each row perturbed as above; their tensors and scale tensors are large
enough to take the codecs' large-tensor paths, as a real multi-gigabyte
checkpoint's do, where the corpus' tensors (at most a few MB) never do.
and also: page-cache growth per cold shard read (Cached in /proc/meminfo),
daemon peak RSS (VmHWM), daemon CPU seconds per decoded GB, mount time, and
`ptwmfs-tool pack -j N` beside `zstd -T N -3` on the same shards. What the
mount returned is checked against the raw files' sha256.
Speed is measured here, never in tests.
"""
import argparse
import contextlib
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_mount import Mounted

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PYTHON = os.path.join(REPO, ".venv", "bin", "python")
BLOCK = 1 << 20
CORPUS_BF16 = ["esrgan-thick-x4.BF16.safetensors", "movenet-thunder.BF16.safetensors", "posenet.BF16.safetensors"]
DTYPES = ("BF16", "MXFP4", "NVFP4", "F8_E4M3")
LOWP_POOL = 16      # perturbed, quantised copies of the corpus per low-precision checkpoint
LOWP_RECIPE = "v1"  # in the cache key: bump when the low-precision build changes
LARGE_SHAPE = (2880, 5760)  # --layers large: a gpt-oss expert's gate_up_proj, [out, in]
LARGE_LAYERS = 2            # ... layers per pool member

# numpy (memmap load, checkpoint noise) and safetensors live in the
# project's .venv when tools/install-deps.sh made one: run under it.
if os.path.exists(VENV_PYTHON) and os.path.realpath(sys.prefix) != os.path.realpath(os.path.join(REPO, ".venv")):
    os.execv(VENV_PYTHON, [VENV_PYTHON] + sys.argv)
try:
    import numpy as np
except ImportError:
    sys.exit("load_bench.py needs numpy: create .venv (tools/install-deps.sh) or install python3-numpy")
try:
    import safetensors
    from safetensors import safe_open
except ImportError:
    safetensors = None
try:  # Debian's python3-torch, through the .venv's system site packages
    import safetensors.torch as safetensors_torch
except ImportError:
    safetensors_torch = None


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def drop_caches():
    subprocess.run(["sync"], check=True)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def meminfo(field):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def read_header(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return 8 + n, header


# ---------------------------------------------------------------- checkpoint

def corpus_tensors(corpus):
    """(name, shape, bytes) of every BF16 tensor of the corpus files."""
    out = []
    for file in CORPUS_BF16:
        path = os.path.join(corpus, file)
        data_start, header = read_header(path)
        with open(path, "rb") as f:
            blob = f.read()
        model = file.split(".")[0]
        for name, info in header.items():
            if info["dtype"] != "BF16":
                continue
            begin, end = info["data_offsets"]
            out.append((f"{model}.{name}", info["shape"], blob[data_start + begin:data_start + end]))
    return out


def write_checkpoint(out, shards, total_size):
    """Writes each shard (a list of write_shard's tensors) as
    model-0000K-of-0000N.safetensors in out, and the index
    model.safetensors.index.json naming each tensor's shard; returns the
    shards' file names."""
    names = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    weight_map = {}
    for name, tensors in zip(names, shards):
        write_shard(os.path.join(out, name), tensors)
        for tensor_name, *_ in tensors:
            weight_map[tensor_name] = name
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total_size}, "weight_map": weight_map}, f, indent=1)
    return names


def write_shard(path, tensors):
    """tensors: (name, shape, bytes), BF16, or (name, dtype, shape, bytes)."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for tensor in tensors:
        name, dtype, shape, data = tensor if len(tensor) == 4 else (tensor[0], "BF16") + tuple(tensor[1:])
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for tensor in tensors:
            f.write(tensor[-1])
    os.rename(tmp, path)


class NoiseWindow:
    """Consecutive slices of a fixed noise array, so that repeated tensors
    get fresh noise cheaply; a slice that would run past the array's end
    starts at a random place in it instead (at 0 when it is longer)."""

    def __init__(self, noise, rng):
        self.noise, self.rng, self.at = noise, rng, 0

    def take(self, n):
        if self.at + n > self.noise.size:
            self.at = int(self.rng.integers(0, self.noise.size - n)) if n < self.noise.size else 0
        view = self.noise[self.at:self.at + n]
        self.at += n
        return view


class ShardSplitter:
    """Tensors dealt into shards in order: a shard closes once it holds
    shard_size bytes or more, and a group added at once (a tensor and its
    scales) never straddles two."""

    def __init__(self, shard_size):
        self.shard_size, self.shards, self.current, self.current_bytes, self.written = shard_size, [], [], 0, 0

    def add(self, tensors):
        group_bytes = sum(len(t[-1]) for t in tensors)
        self.current += tensors
        self.current_bytes += group_bytes
        self.written += group_bytes
        if self.current_bytes >= self.shard_size:
            self.shards.append(self.current)
            self.current, self.current_bytes = [], 0

    def finish(self):
        if self.current:
            self.shards.append(self.current)
            self.current, self.current_bytes = [], 0
        return self.shards


def build_checkpoint(corpus, out, total, shard_size):
    """Shards of repeated corpus tensors, each copy's low mantissa bits
    XORed with fresh noise so no two copies are alike."""
    os.makedirs(out, exist_ok=True)
    base = corpus_tensors(corpus)
    rng = np.random.default_rng(11)
    noise = NoiseWindow((rng.integers(0, 4, size=16 << 20, dtype=np.uint16)).astype("<u2"), rng)  # 32 MiB
    split, layer = ShardSplitter(shard_size), 0
    while split.written < total:
        for name, shape, data in base:
            if split.written >= total:
                break
            words = np.frombuffer(data, dtype="<u2")
            split.add([(f"model.layers.{layer}.{name}", shape, (words ^ noise.take(words.size)).tobytes())])
        layer += 1
    return write_checkpoint(out, split.finish(), split.written)


# ------------------------------------------------ low-precision checkpoint

def _quantised_copy(job):
    """One pool member: every corpus float tensor (the ORIGINAL files
    derive_variants.py uses) perturbed, each output channel (last axis) by
    its own factor exp(N(0, 0.3)) plus Gaussian noise of 0.05 of the
    tensor's standard deviation, then quantised with derive_variants.py's
    own recipe. Returns [(corpus name, [(suffix, dtype, shape, bytes)])].
    With layers="large", instead LARGE_LAYERS layers of LARGE_SHAPE (see
    _large_layers)."""
    corpus, dtype, seed, layers = job
    import derive_variants as dv  # tools/bench, beside this file
    recipe = {"MXFP4": lambda n, w: dv.mxfp4(n, w)[0], "NVFP4": lambda n, w: dv.nvfp4(n, w)[0],
              "F8_E4M3": dv.fp8_block}[dtype]
    rng = np.random.default_rng(seed)
    if layers == "large":
        return _large_layers(corpus, dtype, recipe, rng)
    groups = []
    for model, file in dv.MODELS.items():
        tensors = dv.read_safetensors(os.path.join(corpus, file))
        for name in sorted(tensors):
            w = tensors[name]
            factor = np.exp(rng.normal(0, 0.3, w.shape[-1] if w.ndim else 1)).astype(np.float32)
            w = w * factor + rng.normal(0, 0.05 * float(w.std()) + 1e-30, w.shape).astype(np.float32)
            full = f"{model}.{name}"
            if w.ndim < 2:  # biases and the like stay BF16, as derive_variants writes them
                groups.append((full, [("", "BF16", list(w.shape), dv.bf16(w))]))
                continue
            groups.append((full, [(n[len(full):], t, s, b) for n, t, s, b in recipe(full, w)]))
    return groups


def _large_layers(corpus, dtype, recipe, rng):
    """LARGE_LAYERS weights of a large model's shape (LARGE_SHAPE, a gpt-oss
    expert's gate_up_proj [out, in]) made of the corpus' trained values: the
    rows of every corpus float tensor of 2 or more dimensions (PyTorch's
    [out, in] form, derive_variants.to_rows) laid end to end, a layer
    cut from it at a random place (wrapping around), each of its rows
    scaled by its own exp(N(0, 0.3)) plus Gaussian noise of 0.05 of the
    values' standard deviation, then quantised with the recipe. The
    values are the corpus's; only their layout is a large model's: its
    tensors (and their scale tensors) are large enough for the codecs'
    large-tensor paths (several chunks a tensor, the scales in chunks of
    their own), which the corpus' small tensors never take."""
    import derive_variants as dv
    rows = []
    for file in dv.MODELS.values():
        for w in dv.read_safetensors(os.path.join(corpus, file)).values():
            if w.ndim >= 2:
                rows.append(dv.to_rows(w).reshape(-1))
    values = np.concatenate(rows)
    out_dim, in_dim = LARGE_SHAPE
    n = out_dim * in_dim
    spread = float(values.std())
    groups = []
    for k in range(LARGE_LAYERS):
        start = int(rng.integers(0, values.size))
        take = np.take(values, np.arange(start, start + n), mode="wrap").reshape(out_dim, in_dim)
        w = take * np.exp(rng.normal(0, 0.3, (out_dim, 1))).astype(np.float32)
        w = w + rng.normal(0, 0.05 * spread, w.shape).astype(np.float32)
        full = f"mlp.experts.{k}.gate_up_proj"
        # fp8_block takes a kernel's [in, out] to [out, in]: the transpose keeps the rows.
        parts = recipe(full, w.T if dtype == "F8_E4M3" else w)
        groups.append((full, [(p[len(full):], t, s, b) for p, t, s, b in parts]))
    return groups


def lowp_pool(corpus, dtype, jobs, layers):
    """LOWP_POOL quantised copies, on every core (numpy quantises at some
    6 MB/s of output a core: the pool, not the checkpoint, is quantised)."""
    import concurrent.futures
    import multiprocessing
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    work = [(corpus, dtype, 1000 + i, layers) for i in range(LOWP_POOL)]
    with concurrent.futures.ProcessPoolExecutor(max(1, jobs), mp_context=multiprocessing.get_context("fork")) as ex:
        return list(ex.map(_quantised_copy, work))


def _sign_mask(data, dtype):
    """The sign bits that may flip: those of nonzero codes (the recipes
    write no negative zero). FP4: two nibbles a byte, sign bits 0x08 and
    0x80; F8_E4M3: 0x80."""
    if dtype == "F8_E4M3":
        return ((data & 0x7F) + 0x7F) & 0x80
    t = data & 0x77
    return ((t | (t >> 1) | (t >> 2)) & 0x11) << 3


def build_lowp_checkpoint(corpus, out, total, shard_size, dtype, jobs, layers):
    """Shards of low-precision tensors in the layouts derive_variants.py
    writes (MXFP4: X.blocks U8 + X.scales U8 E8M0; NVFP4: X U8 + X_scale
    F8_E4M3 + X_scale_2 F32; F8_E4M3: X + X_scale_inv F32 per 128x128 block,
    DeepSeek-V3's), each repetition of the corpus drawn, tensor by tensor,
    from a pool of LOWP_POOL perturbed and quantised copies and varied by
    exact re-quantisations of that copy, cheap in numpy:
      - the sign of each nonzero code flipped with probability 1/2 (the
        recipes are sign-symmetric: the codes of w with those signs
        negated), so no value chunk repeats;
      - MXFP4: the tensor scaled by 2^k, k in -1..1 (its E8M0 scales + k);
        NVFP4: X_scale_2 and F8_E4M3: X_scale_inv scaled by exp(N(0, 0.2))
        (the tensor scaled by that factor);
      - the few BF16 tensors (ndim < 2): the two lowest mantissa bits
        XORed with noise, as the BF16 checkpoint's.
    A tensor's group (values and scales) never straddles two shards."""
    os.makedirs(out, exist_ok=True)
    start = time.perf_counter()
    pool = lowp_pool(corpus, dtype, jobs, layers)
    print(f"  quantised a pool of {len(pool)} perturbed {'large layer sets' if layers == 'large' else 'corpus copies'} in {time.perf_counter() - start:.0f} s",
          file=sys.stderr, flush=True)
    values_dtype = "F8_E4M3" if dtype == "F8_E4M3" else "U8"
    rng = np.random.default_rng(12)
    noise = NoiseWindow(rng.integers(0, 256, size=32 << 20, dtype=np.uint8), rng)  # 32 MiB
    split, layer = ShardSplitter(shard_size), 0
    groups = len(pool[0])
    while split.written < total:
        members = rng.integers(0, len(pool), size=groups)
        shifts = rng.integers(-1, 2, size=groups)
        factors = np.exp(rng.normal(0, 0.2, size=groups)).astype(np.float32)
        for g in range(groups):
            if split.written >= total:
                break
            full, parts = pool[members[g]][g]
            group = []
            for suffix, dt, shape, data in parts:
                a = np.frombuffer(data, dtype=np.uint8)
                if dt == "BF16":
                    words = np.frombuffer(data, dtype="<u2")
                    data = (words ^ (noise.take(words.size) & 3).astype("<u2")).tobytes()
                elif dt == values_dtype and suffix in ("", ".blocks"):
                    data = (a ^ (noise.take(a.size) & _sign_mask(a, dtype))).tobytes()
                elif dtype == "MXFP4":  # .scales, E8M0 as U8; 0 (an all-zero block) stays
                    data = np.where(a > 0, np.clip(a.astype(np.int16) + shifts[g], 1, 254), 0).astype(np.uint8).tobytes()
                elif dt == "F32":  # NVFP4's X_scale_2, FP8's X_scale_inv
                    data = (np.frombuffer(data, dtype="<f4") * factors[g]).astype("<f4").tobytes()
                group.append((f"model.layers.{layer}.{full}{suffix}", dt, shape, data))
            split.add(group)
        layer += 1
    names = write_checkpoint(out, split.finish(), split.written)
    print(f"  built {split.written / 1e9:.2f} GB in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    return names

# ----------------------------------------------------------- disk rate

def whole_disk(path):
    """MAJ:MIN of the block device holding path, the whole disk where it
    is a partition (the throttle is the disk's request queue's)."""
    st = os.stat(path)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    sysfs = f"/sys/dev/block/{dev}"
    if not os.path.exists(sysfs):
        sys.exit(f"load_bench.py: --disk-rate: {path} is not on a block device ({dev}: no {sysfs})")
    if os.path.exists(os.path.join(sysfs, "partition")):
        with open(os.path.join(os.path.realpath(sysfs), "..", "dev")) as f:
            dev = f.read().strip()
    return dev


@contextlib.contextmanager
def disk_rate(path, rate):
    """Reads from path's disk capped at rate bytes/s, for this process and
    every process it starts meanwhile (the daemon, the loaders): a blkio
    cgroup (v1's blkio.throttle.read_bps_device). Both sides of the
    benchmark read the same disk through the same cap, as from a cloud
    volume of that speed; the FUSE ceiling's RAM copies are not capped."""
    root = "/sys/fs/cgroup/blkio"
    if not os.path.exists(os.path.join(root, "blkio.throttle.read_bps_device")):
        sys.exit("load_bench.py: --disk-rate needs cgroup v1's blkio controller at /sys/fs/cgroup/blkio (and root)")
    group = os.path.join(root, f"ptwmfs-load-{os.getpid()}")
    os.makedirs(group, exist_ok=True)
    with open(os.path.join(group, "blkio.throttle.read_bps_device"), "w") as f:
        f.write(f"{whole_disk(path)} {rate}\n")
    with open(os.path.join(group, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))
    try:
        yield
    finally:
        with open(os.path.join(root, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        for _ in range(50):  # the daemon may take a moment to leave it
            try:
                os.rmdir(group)
                break
            except OSError:
                time.sleep(0.1)


# ---------------------------------------------------------------- processes

def run_measured(argv, **kwargs):
    """Runs argv; returns (seconds, peak RSS bytes) of that child alone.
    The peak is polled from /proc (VmHWM), not taken from wait4: exec
    carries the parent's high-water mark into the child's ru_maxrss, and
    this script holds gigabytes after building the checkpoint."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, **kwargs)
    peak = 0
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]) * 1024)
        except OSError:
            pass
        time.sleep(0.02)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{argv[0]} failed ({proc.returncode})")
    return seconds, peak


# ---------------------------------------------------------------- loads

_buffer = bytearray(BLOCK)


def sequential_read(path, digest=None):
    view = memoryview(_buffer)
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(view)
            if not n:
                break
            if digest is not None:
                digest.update(view[:n])


def memmap_load(path, scratch):
    """Every tensor in header order copied out of a numpy memmap."""
    data_start, header = read_header(path)
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    for info in header.values():
        begin, end = info["data_offsets"]
        n = end - begin
        np.copyto(scratch[:n], mm[data_start + begin:data_start + end])
    del mm


def safetensors_load(path):
    """Every tensor through safetensors' own loader: load_file into torch
    tensors, as transformers loads a shard (safe_open + get_tensor over
    the file's memory map). Without torch: numpy has no bfloat16, so
    safe_open(framework="numpy") refuses BF16 tensors, and deserialize of
    the file's bytes hands each one out as bytes instead. (That path
    allocates the file's size twice in fresh memory; on this VM, with free
    page reporting on, the first touch of fresh memory after a FUSE read
    cost the reader 10-12 s of CPU where it cost 1.7 s after a disk read,
    and 1.5 s after either with reporting off: the application's cost,
    not the mount's.)"""
    if safetensors_torch is not None:
        safetensors_torch.load_file(path)
        return
    with open(path, "rb") as f:
        for _name, _tensor in safetensors.deserialize(f.read()):
            pass


def safetensors_api():
    return "safetensors.torch.load_file" if safetensors_torch is not None else "safetensors.deserialize(f.read())"


# ---------------------------------------------------------------- report

def page_reporting():
    """Whether the guest hands freed memory back to its host (virtio-balloon
    free page reporting): then every page the CPU writes first after a cache
    drop costs a host fault, which a mount pays when it fills its page cache
    and a disk read (filled by DMA) does not."""
    try:
        with open("/sys/module/page_reporting/parameters/page_reporting_order") as f:
            order = int(f.read())
        with open("/sys/module/page_reporting/parameters/reported_kib") as f:
            reported = int(f.read())
    except (OSError, ValueError):
        return "free page reporting: not in this kernel"
    state = "on" if order <= 10 else "off"
    return f"free page reporting: {state} (order {order}, {reported >> 20} GiB reported since boot)"


def fmt(values, unit_scale=1.0, digits=0):
    med = statistics.median(values) * unit_scale
    return f"{med:.{digits}f} [{min(values) * unit_scale:.{digits}f}..{max(values) * unit_scale:.{digits}f}]"


def reusable(index, key_file, key, dtype):
    """Whether the checkpoint in SCRATCH was built with these parameters:
    its key file says so, or (kept by a version of this script that wrote
    none) it is a BF16 checkpoint and BF16 is asked for."""
    if not os.path.exists(index):
        return False
    if os.path.exists(key_file):
        with open(key_file) as f:
            return f.read().strip() == key
    if dtype != "BF16":
        return False
    shards = sorted(n for n in os.listdir(os.path.dirname(index)) if n.endswith(".safetensors"))
    return bool(shards) and all(i["dtype"] == "BF16" for i in read_header(os.path.join(os.path.dirname(index),
                                                                                      shards[0]))[1].values())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    corpus = os.path.normpath(os.path.join(REPO, "..", "shared", "corpus"))
    if not os.path.isdir(corpus) and os.path.isdir("/work/shared/corpus"):  # a clone deeper than /work/main
        corpus = "/work/shared/corpus"
    parser.add_argument("--corpus", default=corpus, help=f"the corpus ({corpus})")
    parser.add_argument("--dtype", default="BF16", choices=DTYPES,
                        help="the checkpoint's weights: BF16, MXFP4, NVFP4 or F8_E4M3 (128x128 block scales) (BF16)")
    parser.add_argument("--layers", default="corpus", choices=("corpus", "large"),
                        help="low-precision checkpoints: the corpus' tensors as they are (corpus), or layers of "
                             f"a large model's shape, {LARGE_SHAPE[0]}x{LARGE_SHAPE[1]}, cut from their values "
                             "(large) (corpus)")
    parser.add_argument("--size", default="4G", help="checkpoint size (4G)")
    parser.add_argument("--shard", default="2G", help="shard size (2G)")
    parser.add_argument("--runs", type=int, default=5, help="runs of each cold measurement (5)")
    parser.add_argument("--scratch", default=None, help="where the checkpoint and stores go (same disk as raw)")
    parser.add_argument("--build", default=os.path.join(REPO, "build"), help="meson build directory")
    parser.add_argument("-o", dest="options", default="", help="extra ptwmfs mount options")
    parser.add_argument("--jobs", type=int, default=os.cpu_count(), help="pack -j N and zstd -T N (cores)")
    parser.add_argument("--only", default="seq,memmap,safetensors,warm,pack",
                        help="comma-separated subset of seq,memmap,safetensors,warm,pack")
    parser.add_argument("--keep", action="store_true", help="keep the checkpoint and stores for the next run")
    parser.add_argument("--disk-rate", default=None,
                        help="cap reads of the scratch's disk at this many bytes/s (K/M/G suffix) for both "
                             "sides while loading, as a cloud volume of that speed would (a blkio cgroup; "
                             "needs root) (no cap)")
    args = parser.parse_args()
    only = set(args.only.split(","))
    ptwmfs = os.path.join(args.build, "src", "fs", "ptwmfs")
    tool = os.path.join(args.build, "tools", "ptwmfs-tool", "ptwmfs-tool")
    total, shard_size = parse_size(args.size), parse_size(args.shard)
    large = args.layers == "large"
    if large and args.dtype == "BF16":
        parser.error("--layers large is for the low-precision checkpoints (--dtype MXFP4, NVFP4, F8_E4M3)")
    if os.geteuid() != 0:
        print("note: not root: caches cannot be dropped, 'cold' is not cold", file=sys.stderr)

    scratch = args.scratch or os.path.join("/work" if os.path.isdir("/work") else tempfile.gettempdir(),
                                           f"ptwmfs-load-{total >> 20}M-{shard_size >> 20}M"
                                           + ("" if args.dtype == "BF16" else f"-{args.dtype}")
                                           + ("-large" if large else ""))
    raw_dir, store_dir = os.path.join(scratch, "raw"), os.path.join(scratch, "store")
    index = os.path.join(raw_dir, "model.safetensors.index.json")  # written last
    # What the kept checkpoint was built with (its parameters and recipe).
    key_file = os.path.join(scratch, "checkpoint.key")
    key = f"{args.dtype} {total} {shard_size}" + ("" if args.dtype == "BF16" else f" {LOWP_RECIPE} pool {LOWP_POOL}")
    if large:  # (the corpus layout's key is as before: kept checkpoints stay reusable)
        key += f" layers {LARGE_LAYERS}x{LARGE_SHAPE[0]}x{LARGE_SHAPE[1]}"
    ceiling_dir = None
    try:
        if not reusable(index, key_file, key, args.dtype):
            shutil.rmtree(scratch, ignore_errors=True)
            print(f"building a {total / 1e9:.1f} GB {args.dtype} checkpoint in {raw_dir} ...", file=sys.stderr)
            if args.dtype == "BF16":
                build_checkpoint(args.corpus, raw_dir, total, shard_size)
            else:
                build_lowp_checkpoint(args.corpus, raw_dir, total, shard_size, args.dtype, args.jobs, args.layers)
            with open(key_file, "w") as f:
                f.write(key + "\n")
        shards = sorted(n for n in os.listdir(raw_dir) if n.endswith(".safetensors"))
        sizes = {n: os.path.getsize(os.path.join(raw_dir, n)) for n in shards}
        size = sum(sizes.values())

        # Pack, beside zstd on the same files.
        pack_line = zstd_line = None
        if "pack" in only or not os.path.exists(os.path.join(store_dir, "model.safetensors.index.json")):
            shutil.rmtree(store_dir, ignore_errors=True)
            drop_caches()
            pack_s, pack_rss = run_measured([tool, "pack", "-q", f"-j{args.jobs}", raw_dir, store_dir])
            pack_line = (pack_s, pack_rss)
            zdir = os.path.join(scratch, "zstd")
            os.makedirs(zdir, exist_ok=True)
            drop_caches()
            zstd_s, zstd_rss = run_measured(["zstd", "-q", "-f", "-3", f"-T{args.jobs}", "--output-dir-flat", zdir]
                                            + [os.path.join(raw_dir, n) for n in shards])
            zsize = sum(os.path.getsize(os.path.join(zdir, n + ".zst")) for n in shards)
            shutil.rmtree(zdir)
            zstd_line = (zstd_s, zstd_rss, zsize)
        stored = sum(os.path.getsize(os.path.join(store_dir, n + ".ptwm")) for n in shards)

        print(f"ptwmfs load benchmark: {len(shards)} shards, {size / 1e9:.2f} GB {args.dtype} in {raw_dir}; "
              f"stores {stored / 1e9:.2f} GB (ratio {stored / size:.3f}); options '{args.options}'")
        print(f"load average at start: {loadavg()}; {args.runs} cold runs each, raw and mount interleaved; "
              f"MB/s of original bytes, median [min..max]"
              + (f"; disk reads capped at {parse_size(args.disk_rate) / 1e6:.0f} MB/s" if args.disk_rate else ""))
        if pack_line:
            zs, zr, zsize = zstd_line
            print(f"pack -j{args.jobs}: {size / pack_line[0] / 1e6:.0f} MB/s, peak RSS {pack_line[1] >> 20} MiB, "
                  f"ratio {stored / size:.3f} | zstd -T{args.jobs} -3: {size / zs / 1e6:.0f} MB/s, "
                  f"peak RSS {zr >> 20} MiB, ratio {zsize / size:.3f}")

        truth = {}
        for n in shards:
            digest = hashlib.sha256()
            sequential_read(os.path.join(raw_dir, n), digest)
            truth[n] = digest.hexdigest()

        tensor_max = 0
        for n in shards:
            _, header = read_header(os.path.join(raw_dir, n))
            tensor_max = max(tensor_max, max(i["data_offsets"][1] - i["data_offsets"][0] for i in header.values()))
        scratch_buffer = np.empty(tensor_max, dtype=np.uint8)

        loads = []
        if "seq" in only:
            loads.append(("seq", lambda p: sequential_read(p)))
        if "memmap" in only:
            loads.append(("memmap", lambda p: memmap_load(p, scratch_buffer)))
        if "safetensors" in only:
            if safetensors is None:
                print("safetensors: skipped: no .venv with safetensors")
            elif safetensors_torch is not None and args.dtype in ("NVFP4", "F8_E4M3") and not hasattr(
                    safetensors_torch.torch, "float8_e4m3fn"):
                print(f"safetens: skipped: torch {safetensors_torch.torch.__version__} has no float8_e4m3fn "
                      f"for the {args.dtype} checkpoint's F8_E4M3 tensors")
            else:
                loads.append(("safetens", safetensors_load))
                print(f"safetens: {safetensors_api()} of every shard")

        # The FUSE ceiling: the raw shards from RAM through the same daemon.
        ceiling_loads = {"seq", "memmap"} & only
        if ceiling_loads:
            ceiling_dir = tempfile.mkdtemp(prefix="ptwmfs-load-ceiling-", dir="/dev/shm")
            for n in shards:
                shutil.copyfile(os.path.join(raw_dir, n), os.path.join(ceiling_dir, n + ".bin"))

        def sides(name, run):
            order = ["raw", "mount"] + (["ceiling"] if name in ceiling_loads and ceiling_dir else [])
            return order[run % len(order):] + order[:run % len(order)]

        results = {(name, side): [] for name, _ in loads for side in sides(name, 0)}
        cache_growth = {"raw": [], "mount": []}
        decoded = cpu = 0.0
        mount_times, peak_rss = [], 0
        options = args.options
        with contextlib.ExitStack() as stack:
            if args.disk_rate:
                stack.enter_context(disk_rate(raw_dir, parse_size(args.disk_rate)))
            m = stack.enter_context(Mounted(ptwmfs, store_dir, options, prefix="ptwmfs-load-"))
            mount_times.append(m.mount_seconds)
            roots = {"raw": raw_dir, "mount": m.path}
            if ceiling_dir:
                roots["ceiling"] = stack.enter_context(
                    Mounted(ptwmfs, ceiling_dir, options, prefix="ptwmfs-ceiling-")).path
            for run in range(args.runs):
                for name, load in loads:
                    for side in sides(name, run):
                        root = roots[side]
                        suffix = ".bin" if side == "ceiling" else ""
                        drop_caches()
                        cpu_before = m.cpu_seconds()
                        start = time.perf_counter()
                        for n in shards:
                            cached = meminfo("Cached")
                            load(os.path.join(root, n + suffix))
                            if name == "seq" and side != "ceiling":
                                cache_growth[side].append((meminfo("Cached") - cached) / sizes[n])
                        results[(name, side)].append(size / (time.perf_counter() - start) / 1e6)
                        print(f"  run {run + 1}/{args.runs} {name} {side}: {results[(name, side)][-1]:.0f} MB/s",
                              file=sys.stderr, flush=True)
                        if side == "mount":
                            cpu += m.cpu_seconds() - cpu_before
                            decoded += size
                        peak_rss = max(peak_rss, m.status("VmHWM"))
            # What the mount returns must be the original bytes.
            drop_caches()
            for n in shards:
                digest = hashlib.sha256()
                sequential_read(os.path.join(m.path, n), digest)
                if digest.hexdigest() != truth[n]:
                    sys.exit(f"MISMATCH: {n} read through the mount differs from the raw file")
            warm = {"raw": [], "mount": [], "shm": []}
            if "warm" in only:
                for n in shards:
                    sequential_read(os.path.join(raw_dir, n))
                for _ in range(args.runs):
                    for side in ("raw", "mount"):
                        root = raw_dir if side == "raw" else m.path
                        start = time.perf_counter()
                        for n in shards:
                            sequential_read(os.path.join(root, n))
                        warm[side].append(size / (time.perf_counter() - start) / 1e6)
                shm = os.path.join("/dev/shm", f"ptwmfs-load-{os.getpid()}")
                try:
                    shutil.copyfile(os.path.join(raw_dir, shards[0]), shm)
                    for _ in range(args.runs):
                        start = time.perf_counter()
                        sequential_read(shm)
                        warm["shm"].append(sizes[shards[0]] / (time.perf_counter() - start) / 1e6)
                finally:
                    os.unlink(shm)
            peak_rss = max(peak_rss, m.status("VmHWM"))
        for _ in range(2):
            with Mounted(ptwmfs, store_dir, options, prefix="ptwmfs-load-") as m2:
                mount_times.append(m2.mount_seconds)

        print("sha256 through the mount: all shards match the raw files")
        print(f"{'load':<10} {'raw MB/s':>22} {'mount MB/s':>22} {'mount/raw':>10}")
        for name, _ in loads:
            raw, mnt = results[(name, "raw")], results[(name, "mount")]
            print(f"{name:<10} {fmt(raw):>22} {fmt(mnt):>22} {statistics.median(mnt) / statistics.median(raw):>10.2f}")
        for name in ("seq", "memmap"):
            if (name, "ceiling") not in results:
                continue
            ceil = results[(name, "ceiling")]
            print(f"{name} FUSE ceiling (raw shards from RAM through the daemon, no decoding, cold): {fmt(ceil)} MB/s; "
                  f"ceiling/raw {statistics.median(ceil) / statistics.median(results[(name, 'raw')]):.2f}, "
                  f"mount/ceiling {statistics.median(results[(name, 'mount')]) / statistics.median(ceil):.2f}")
        if warm["mount"]:
            print(f"{'warm':<10} {fmt(warm['raw']):>22} {fmt(warm['mount']):>22} "
                  f"{statistics.median(warm['mount']) / statistics.median(warm['raw']):>10.2f}")
            print(f"warm limit, 4 KiB-page tmpfs read: {fmt(warm['shm'])} MB/s; mount/limit "
                  f"{statistics.median(warm['mount']) / statistics.median(warm['shm']):.2f}")
        if cache_growth["mount"]:
            print(f"page-cache growth per cold shard read, x shard size: raw {fmt(cache_growth['raw'], 1, 2)}, "
                  f"mount {fmt(cache_growth['mount'], 1, 2)}")
        cache_size = next((o.split("=", 1)[1] for o in options.split(",") if o.startswith("cache_size=")), "256M")
        # (--only pack decodes nothing: no CPU per GB then.)
        cpu_per_gb = f"CPU {cpu / (decoded / 1e9):.2f} s per decoded GB; " if decoded else ""
        print(f"daemon peak RSS {peak_rss / 2**20:.0f} MiB (cache_size {cache_size}); {cpu_per_gb}"
              f"mount time {fmt(mount_times, 1e3, 0)} ms")
        print(f"load average at end: {loadavg()}; {page_reporting()}")
    finally:
        if ceiling_dir:
            shutil.rmtree(ceiling_dir, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
