#!/usr/bin/python3
"""Writes a small model directory for tests: safetensors files of bf16, f32,
f16 and u8 tensors with realistic (normal-distributed) values, a config.json,
a subdirectory and a symlink.

    make_model.py OUT_DIR [--seed N] [--scale K]

--scale multiplies the tensor sizes (1 gives a few MiB in total).
"""
import argparse
import json
import os
import struct

import numpy as np


def bf16_from_f32(values):
    """bfloat16 bytes by truncating float32 (as many checkpoints are made)."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32)
    return (bits >> 16).astype(np.uint16)


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, dtype string, shape, little-endian ndarray)."""
    header = {}
    offset = 0
    for name, dtype, shape, array in tensors:
        nbytes = array.nbytes
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # safetensors pads the header to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, array in tensors:
            f.write(np.ascontiguousarray(array).tobytes())


def layer_tensors(rng, prefix, width, scale):
    rows = width * scale
    weight = rng.normal(0.0, 0.02, size=(rows, width)).astype(np.float32)
    return [
        (f"{prefix}.weight", "BF16", (rows, width), bf16_from_f32(weight)),
        (f"{prefix}.bias", "F32", (rows,), rng.normal(0.0, 0.01, size=rows).astype(np.float32)),
        (f"{prefix}.norm", "F16", (width,), (1.0 + rng.normal(0.0, 0.05, size=width)).astype(np.float16)),
    ]


def make_model(out_dir, seed=1, scale=1):
    rng = np.random.default_rng(seed)
    os.makedirs(out_dir, exist_ok=True)

    tensors = []
    for layer in range(4):
        tensors += layer_tensors(rng, f"model.layers.{layer}.mlp", 256, scale)
    embed = rng.normal(0.0, 0.05, size=(1000 * scale, 128)).astype(np.float32)
    tensors.append(("model.embed.weight", "F32", embed.shape, embed))
    quantised = np.clip(rng.normal(128, 30, size=(64 * scale, 512)), 0, 255).astype(np.uint8)
    tensors.append(("model.quantised", "U8", quantised.shape, quantised))
    # Incompressible bytes: stored raw, which the daemon reads in place.
    noise = rng.integers(0, 256, size=(128 * scale, 4096), dtype=np.uint8)
    tensors.append(("model.noise", "U8", noise.shape, noise))
    tensors.append(("model.tiny", "F32", (3,), np.array([1.0, -2.5, 3.25], dtype=np.float32)))
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors, {"format": "pt"})

    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump({"architectures": ["TestModel"], "hidden_size": 256, "num_layers": 4}, f, indent=2)

    sub = os.path.join(out_dir, "adapters")
    os.makedirs(sub, exist_ok=True)
    write_safetensors(os.path.join(sub, "lora.safetensors"), layer_tensors(rng, "lora", 64, scale))
    with open(os.path.join(sub, "README.txt"), "w") as f:
        f.write("adapter weights for tests\n")

    # A Hugging Face cache style link: relative, into another directory.
    os.symlink("adapters/lora.safetensors", os.path.join(out_dir, "lora-link.safetensors"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scale", type=int, default=1)
    args = parser.parse_args()
    make_model(args.out_dir, args.seed, args.scale)


if __name__ == "__main__":
    main()
