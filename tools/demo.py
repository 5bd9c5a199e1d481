#!/usr/bin/python3
"""The README's first command, after setup: make an example model directory
(generated, model-shaped: bf16 projection and MLP weights, f32 norms, a
config.json), pack it, mount it with ptwmfs, read it back through mmap as a
framework would, check every file's sha256 against the original, and print
the compression ratio and read throughput. Leaves no mount behind.

    tools/demo.py [--build DIR] [--workdir DIR] [--layers N]
"""
import argparse
import hashlib
import json
import mmap
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "mount"))
sys.path.insert(0, os.path.join(ROOT, "tests", "data"))


def make_example_model(path, layers, rng):
    """A small transformer-shaped checkpoint: what ptwmfs is for."""
    from make_model import bf16_from_f32, write_safetensors
    os.makedirs(path)
    width, hidden = 512, 2048
    tensors = [("model.embed_tokens.weight", "BF16", (8000, width),
                bf16_from_f32(rng.normal(0, 0.02, (8000, width))))]
    for i in range(layers):
        p = f"model.layers.{i}"
        for name, shape in [("self_attn.q_proj", (width, width)), ("self_attn.k_proj", (width, width)),
                            ("self_attn.v_proj", (width, width)), ("self_attn.o_proj", (width, width)),
                            ("mlp.gate_proj", (hidden, width)), ("mlp.up_proj", (hidden, width)),
                            ("mlp.down_proj", (width, hidden))]:
            std = 1.0 / np.sqrt(shape[1])
            tensors.append((f"{p}.{name}.weight", "BF16", shape, bf16_from_f32(rng.normal(0, std, shape))))
        for norm in ["input_layernorm", "post_attention_layernorm"]:
            tensors.append((f"{p}.{norm}.weight", "F32", (width,),
                            (1 + rng.normal(0, 0.05, width)).astype(np.float32)))
    half = len(tensors) // 2  # two shards, as Hugging Face checkpoints come
    write_safetensors(os.path.join(path, "model-00001-of-00002.safetensors"), tensors[:half], {"format": "pt"})
    write_safetensors(os.path.join(path, "model-00002-of-00002.safetensors"), tensors[half:], {"format": "pt"})
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"architectures": ["ExampleForCausalLM"], "hidden_size": width, "intermediate_size": hidden,
                   "num_hidden_layers": layers, "torch_dtype": "bfloat16"}, f, indent=2)


def tree_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def safetensors_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return 8 + n, json.loads(f.read(n))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--workdir", help="where to put the model, store and mount (default: a temporary directory)")
    parser.add_argument("--layers", type=int, default=12)
    args = parser.parse_args()
    os.environ.setdefault("PTWMFS", os.path.join(args.build, "src", "fs", "ptwmfs"))
    os.environ.setdefault("PTWMFS_TOOL", os.path.join(args.build, "tools", "ptwmfs-tool", "ptwmfs-tool"))
    from ptwmfs_testlib import Mount

    work = args.workdir or tempfile.mkdtemp(prefix="ptwmfs-demo-")
    model, store = os.path.join(work, "model"), os.path.join(work, "store")
    shutil.rmtree(model, ignore_errors=True)
    shutil.rmtree(store, ignore_errors=True)
    try:
        make_example_model(model, args.layers, np.random.default_rng(7))
        print(f"example model: {model} ({tree_bytes(model) / 1e6:.1f} MB)")
        started = time.perf_counter()
        subprocess.run([os.environ["PTWMFS_TOOL"], "pack", model, store], check=True)
        print(f"packed in {time.perf_counter() - started:.2f} s: {tree_bytes(model)} -> {tree_bytes(store)} bytes, "
              f"ratio {tree_bytes(store) / tree_bytes(model):.4f}")

        with Mount(store) as mount:
            print(f"mounted {store} at {mount.path}")
            names = sorted(os.listdir(model))
            assert sorted(os.listdir(mount.path)) == names, "the mount lists other files than the model"
            read_bytes, read_seconds = 0, 0.0
            for name in names:
                original = os.path.join(model, name)
                with open(original, "rb") as f:
                    want = hashlib.sha256(f.read()).hexdigest()
                started = time.perf_counter()
                with open(mount / name, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
                    got = hashlib.sha256(m).hexdigest()  # cold: every chunk decoded on first touch
                read_seconds += time.perf_counter() - started
                read_bytes += os.path.getsize(original)
                print(f"  {name}: sha256 {'identical' if got == want else 'DIFFERENT'}")
                if got != want:
                    raise SystemExit(f"{name}: the mounted file differs from the original")

            # What a framework does: map one tensor by its header offsets.
            shard = os.path.join(mount.path, "model-00001-of-00002.safetensors")
            data_start, header = safetensors_header(shard)
            name = "model.layers.0.mlp.up_proj.weight"
            begin, end = header[name]["data_offsets"]
            mapped = np.memmap(shard, dtype=np.uint16, mode="r", offset=data_start + begin,
                               shape=tuple(header[name]["shape"]))
            reference = np.memmap(os.path.join(model, "model-00001-of-00002.safetensors"), dtype=np.uint16,
                                  mode="r", offset=data_start + begin, shape=tuple(header[name]["shape"]))
            assert np.array_equal(mapped, reference)
            as_float = (mapped.astype(np.uint32) << 16).view(np.float32)
            print(f"  numpy.memmap of {name} {list(mapped.shape)} (bf16): equal to the original, "
                  f"mean {as_float.mean():+.5f}, std {as_float.std():.5f}")
            del mapped, reference
            stats = mount.stats()
            print(f"read {read_bytes / 1e6:.1f} MB through mmap of the mount in {read_seconds:.2f} s: "
                  f"{read_bytes / 1e6 / read_seconds:.0f} MB/s cold; "
                  f"{stats.get('cache', stats).get('misses', '?')} chunks decoded")
        print("unmounted; all files identical")
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
