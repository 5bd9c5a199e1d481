#!/usr/bin/python3
"""Adversarial but valid safetensors files in the low-precision layouts the
store pairs and models (MXFP4 blocks + scales, NVFP4 weight + weight_scale +
weight_scale_2, DeepSeek-V3 FP8 weight + weight_scale_inv, FP8 with
per-tensor or per-channel scales, F8_E5M2), each with a twist the tuning
never saw: scales that do not fit their blocks (off by a row, transposed,
of the wrong dtype or count), odd and empty shapes, 3-D and 4-D blocks,
NaN / Inf / negative-zero scale bytes, random bytes as values, tensors and
scale tensors over several chunks, names that only look alike, non-ASCII
names, chains of pairs, and other dtypes alongside.

Standard library only (CI's python may lack numpy), deterministic for a seed.

    make_layouts.py OUT_DIR [--seed N] [--big]

writes one .safetensors file per case. --big adds the cases whose tensors
span many 256 KiB chunks and a 4 MiB modelled chunk (some 40 MiB more).
`cases(seed, big)` gives the same as (file name, tensors, data order)."""
import argparse
import json
import math
import os
import random
import struct

# Bytes per element, or None for packed sub-byte dtypes (F4: 2 a byte).
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
               "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4,
               "I64": 8, "U64": 8, "F64": 8, "C64": 8}


def nbytes(dtype, shape):
    n = math.prod(shape)
    if dtype == "F4":
        return n // 2
    if dtype in ("F6_E2M3", "F6_E3M2"):
        return n * 6 // 8
    return n * DTYPE_BYTES[dtype]


def safetensors_bytes(tensors, order=None, metadata=None):
    """tensors: list of (name, dtype, shape, bytes), in header order.
    order: the indices of `tensors` in data order (default: header order)."""
    order = list(range(len(tensors))) if order is None else order
    assert sorted(order) == list(range(len(tensors)))
    offsets, at = {}, 0
    for i in order:
        name, dtype, shape, data = tensors[i]
        assert len(data) == nbytes(dtype, shape), (name, dtype, shape, len(data))
        offsets[i] = (at, at + len(data))
        at += len(data)
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    for i, (name, dtype, shape, _) in enumerate(tensors):
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets[i])}
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(tensors[i][3] for i in order)


class Gen:
    """Tensor contents: realistic FP4 blocks for their scales, FP8 bytes,
    scale bytes, random bytes."""

    def __init__(self, seed):
        self.r = random.Random(seed)
        # Per spread class, a pool of packed FP4 bytes whose nibbles spread
        # as quantised weights under a block scale do (larger class: larger
        # magnitudes); blocks are slices of it at random offsets.
        self.pools = []
        for spread in range(6):
            w = [math.exp(-((m / (1.0 + spread)) ** 2)) for m in range(8)]
            nib = [m | (s << 3) for m in range(8) for s in (0, 1)]
            wt = [w[m] for m in range(8) for _ in (0, 1)]
            vals = self.r.choices(nib, wt, k=2 * 8192)
            self.pools.append(bytes(vals[2 * i] | (vals[2 * i + 1] << 4) for i in range(8192)))

    def raw(self, n):
        return self.r.randbytes(n)

    def e8m0_scales(self, n, base=118, width=5):
        return bytes(base + self.r.randrange(width) for _ in range(n))

    def e4m3_scales(self, n):
        # Positive E4M3 bytes of a few binades (as block absmax / 6 / s2 are).
        return bytes(0x28 + self.r.randrange(0x28) for _ in range(n))

    def fp4_blocks(self, scales, block_bytes):
        lo = min(scales) if scales else 0
        out = bytearray()
        for s in scales:
            pool = self.pools[min(5, max(0, (s - lo)))]
            at = self.r.randrange(len(pool) - block_bytes)
            out += pool[at:at + block_bytes]
        return bytes(out)

    def fp8(self, n, exponent_bits, mean, sd):
        # Normal-ish FP8 weights: exponents concentrated, sign random.
        mantissa_bits = 7 - exponent_bits
        top = (1 << exponent_bits) - 1
        out = bytearray(n)
        for i in range(n):
            e = max(0, min(top, int(self.r.gauss(mean, sd))))
            out[i] = (self.r.getrandbits(1) << 7) | (e << mantissa_bits) | self.r.getrandbits(mantissa_bits)
        return bytes(out)

    def e4m3(self, n):
        return self.fp8(n, 4, 6, 1.5)

    def e5m2(self, n):
        return self.fp8(n, 5, 13, 2)

    def f32(self, values):
        return struct.pack(f"<{len(values)}f", *values)

    def bf16(self, n):
        return b"".join(struct.pack("<f", self.r.gauss(0, 0.02))[2:] for _ in range(n))


def mx(g, prefix, lead, groups, sep="_", scale_dtype="U8", scales=None, blocks_dtype="U8"):
    """gpt-oss MXFP4: `<prefix>{sep}blocks` [*lead, groups, 16] and
    `<prefix>{sep}scales` [*lead, groups]."""
    n = math.prod(lead) * groups
    s = g.e8m0_scales(n) if scales is None else scales
    b = g.fp4_blocks(s, 16)
    bshape = [*lead, groups, 16] if blocks_dtype != "F4" else [*lead, groups * 32]
    return [(f"{prefix}{sep}blocks", blocks_dtype, bshape, b), (f"{prefix}{sep}scales", scale_dtype, [*lead, groups], s)]


def nv(g, prefix, rows, cols, s2_shape=(), with_s2=True, scales=None):
    """ModelOpt NVFP4: `<prefix>` U8 [rows, cols/2], `<prefix>_scale` F8_E4M3
    [rows, cols/16], `<prefix>_scale_2` F32 of shape s2_shape."""
    s = g.e4m3_scales(rows * cols // 16) if scales is None else scales
    out = [(prefix, "U8", [rows, cols // 2], g.fp4_blocks(s, 8)), (prefix + "_scale", "F8_E4M3", [rows, cols // 16], s)]
    if with_s2:
        out.append((prefix + "_scale_2", "F32", list(s2_shape), g.f32([0.001] * math.prod(s2_shape))))
    return out


def fp8_block(g, prefix, rows, cols, dtype="F8_E4M3", scale_dtype="F32", scale_shape=None):
    """DeepSeek-V3: `<prefix>.weight` [rows, cols], `<prefix>.weight_scale_inv`
    [ceil(rows/128), ceil(cols/128)]."""
    shape = scale_shape if scale_shape is not None else [-(-rows // 128), -(-cols // 128)]
    n = math.prod(shape)
    w = g.e4m3(rows * cols) if dtype == "F8_E4M3" else g.e5m2(rows * cols)
    sb = g.f32([g.r.uniform(1e-4, 1e-2) for _ in range(n)]) if scale_dtype == "F32" else g.raw(nbytes(scale_dtype, shape))
    return [(prefix + ".weight", dtype, [rows, cols], w), (prefix + ".weight_scale_inv", scale_dtype, shape, sb)]


def cases(seed=1, big=False):
    """[(file name, tensors, data order or None)]."""
    g = Gen(seed)
    out = []

    def add(name, tensors, order=None):
        out.append((name + ".safetensors", tensors, order))

    # --- MXFP4 -----------------------------------------------------------
    add("mx-gptoss-4d", mx(g, "model.layers.0.mlp.experts.gate_up_proj", [4, 24], 3)
        + mx(g, "model.layers.0.mlp.experts.down_proj", [4, 12], 6, scale_dtype="F8_E8M0"))
    add("mx-dot-names", mx(g, "blk.0.ffn", [40], 7, sep="."))
    add("mx-2d-blocks", [("w_blocks", "U8", [40 * 7, 16], g.fp4_blocks(s := g.e8m0_scales(280), 16)),
                         ("w_scales", "U8", [280], s)])
    # Scales of the right count, wrong shape: transposed, flattened, [N, 1].
    s = g.e8m0_scales(12 * 5)
    add("mx-scales-transposed", [("a_blocks", "U8", [12, 5, 16], g.fp4_blocks(s, 16)), ("a_scales", "U8", [5, 12], s)])
    s = g.e8m0_scales(12 * 5)
    add("mx-scales-column", [("a_blocks", "U8", [12, 5, 16], g.fp4_blocks(s, 16)), ("a_scales", "U8", [60, 1], s)])
    # Off by one row / group: no pairing (sizes do not divide to 16).
    s = g.e8m0_scales(11 * 5)
    add("mx-scales-short-row", [("a_blocks", "U8", [12, 5, 16], g.raw(12 * 5 * 16)), ("a_scales", "U8", [11, 5], s)])
    s = g.e8m0_scales(12 * 6)
    add("mx-scales-extra-group", [("a_blocks", "U8", [12, 5, 16], g.raw(12 * 5 * 16)), ("a_scales", "U8", [12, 6], s)])
    # Scales of the wrong dtype (BF16 / F32 / I8) beside blocks of the right size.
    add("mx-scales-bf16", [("a_blocks", "U8", [8, 4, 16], g.raw(512)), ("a_scales", "BF16", [8, 4], g.bf16(32))])
    add("mx-scales-f32", [("a_blocks", "U8", [8, 4, 16], g.raw(512)), ("a_scales", "F32", [8, 4], g.raw(128))])
    add("mx-scales-i8", [("a_blocks", "U8", [8, 4, 16], g.raw(512)), ("a_scales", "I8", [8, 4], g.e8m0_scales(32))])
    # Scales of the NV count (one per 8 bytes) under MX names: pairs as NV if E4M3/U8.
    s = g.e8m0_scales(64)
    add("mx-names-nv-count", [("a_blocks", "U8", [8, 4, 16], g.fp4_blocks(s, 8)), ("a_scales", "U8", [64], s)])
    # Blocks kept in F4 / I8.
    add("mx-f4-blocks", mx(g, "x", [6], 3, blocks_dtype="F4"))
    s = g.e8m0_scales(30)
    add("mx-i8-blocks", [("x_blocks", "I8", [10, 3, 16], g.fp4_blocks(s, 16)), ("x_scales", "U8", [10, 3], s)])
    # Special scale bytes: NaN (0xFF), 0, all equal, every byte value.
    add("mx-scales-nan", mx(g, "n", [16], 4, scales=bytes([0xFF]) * 64))
    add("mx-scales-zero", mx(g, "z", [16], 4, scales=bytes(64)))
    add("mx-scales-mixed-special", mx(g, "m", [32], 8, scales=bytes(g.r.choice([0, 1, 127, 254, 255]) for _ in range(256))))
    add("mx-scales-all-values", mx(g, "v", [16], 16, scales=bytes(range(256))))
    add("mx-scales-equal", mx(g, "q", [64], 9, scales=bytes([121]) * (64 * 9)))
    # Random bytes as values; all-zero and all-0xFF blocks.
    s = g.e8m0_scales(100)
    add("mx-random-values", [("r_blocks", "U8", [100, 16], g.raw(1600)), ("r_scales", "U8", [100], s)])
    add("mx-const-blocks", [("c_blocks", "U8", [50, 16], bytes(800)), ("c_scales", "U8", [50], g.e8m0_scales(50)),
                            ("d_blocks", "U8", [50, 16], b"\xff" * 800), ("d_scales", "U8", [50], g.e8m0_scales(50))])
    # Odd and empty shapes.
    add("mx-one-block", mx(g, "o", [1], 1))
    add("mx-one-row", mx(g, "o", [1], 37))
    add("mx-empty", [("e_blocks", "U8", [0, 4, 16], b""), ("e_scales", "U8", [0, 4], b""),
                     ("f_blocks", "U8", [3, 0, 16], b""), ("f_scales", "U8", [3, 0], b""),
                     ("g_blocks", "U8", [2, 1, 16], g.raw(32)), ("g_scales", "U8", [2, 1, 0], b""),
                     ("h", "U8", [0], b"")])
    # Scale tensor listed / stored before, after and far from its blocks.
    t = mx(g, "p", [20], 5) + [("pad.%d" % i, "BF16", [300], g.bf16(300)) for i in range(4)] + mx(g, "q", [20], 5)
    add("mx-scales-first", t, order=[1, 0, 2, 3, 4, 5, 7, 6])
    add("mx-scales-far", t, order=[0, 2, 3, 4, 5, 6, 7, 1])
    add("mx-header-scrambled", list(reversed(t)), order=[3, 0, 5, 1, 7, 2, 6, 4])
    # Look-alike names: x.blocks and x_blocks, both with their scales;
    # "blocks", "_blocks", ".blocks" as whole names; one scale tensor
    # claimed by two block tensors.
    t = (mx(g, "x", [8], 2, sep=".") + mx(g, "x", [8], 2, sep="_")
         + [("blocks", "U8", [16], g.raw(16)), ("scales", "U8", [1], b"\x7f"),
            ("_blocks", "U8", [2, 16], g.raw(32)), ("_scales", "U8", [2], b"\x7e\x7f"),
            (".blocks", "U8", [2, 16], g.raw(32)), (".scales", "U8", [2], b"\x7e\x80")])
    s = g.e8m0_scales(6)
    t += [("y_blocks", "U8", [6, 16], g.fp4_blocks(s, 16)), ("y", "U8", [6, 16], g.fp4_blocks(s, 16)),
          ("y_scales", "U8", [6], s)]
    add("mx-lookalike-names", t)
    # Non-ASCII names.
    add("mx-unicode-names", mx(g, "модель.слой.0.专家", [9], 4) + mx(g, "w\u00e9ights \u2603", [3], 2, sep="."))

    # --- NVFP4 -----------------------------------------------------------
    add("nv-basic-scalar-s2", nv(g, "model.layers.0.mlp.down_proj.weight", 32, 64))
    add("nv-s2-shape-1", nv(g, "l.weight", 16, 48, s2_shape=(1,)))
    add("nv-no-s2", nv(g, "l.weight", 16, 48, with_s2=False))
    add("nv-one-row", nv(g, "l.weight", 1, 16))
    add("nv-one-col-group", nv(g, "l.weight", 40, 16))
    # Cols not a multiple of 16: scales [rows, ceil(cols/16)] do not divide.
    add("nv-cols-40", [("l.weight", "U8", [8, 20], g.raw(160)), ("l.weight_scale", "F8_E4M3", [8, 3], g.e4m3_scales(24)),
                       ("l.weight_scale_2", "F32", [], g.f32([0.5]))])
    # ... and one where the counts happen to divide: [3, 8] and [1, 3].
    add("nv-coincidental-count", [("l.weight", "U8", [3, 8], g.raw(24)), ("l.weight_scale", "F8_E4M3", [1, 3], g.e4m3_scales(3))])
    # Scales of the wrong dtype / count.
    add("nv-scale-f32", [("l.weight", "U8", [8, 16], g.raw(128)), ("l.weight_scale", "F32", [8, 2], g.raw(64))])
    add("nv-scale-e5m2", [("l.weight", "U8", [8, 16], g.raw(128)), ("l.weight_scale", "F8_E5M2", [8, 4], g.raw(32))])
    add("nv-scale-per-tensor", [("l.weight", "U8", [8, 16], g.raw(128)), ("l.weight_scale", "F8_E4M3", [1], b"\x38")])
    # Special E4M3 scale bytes: NaN 0x7F / 0xFF, negative zero 0x80, zero, negatives.
    add("nv-scales-nan", nv(g, "n.weight", 16, 64, scales=bytes(g.r.choice([0x7F, 0xFF, 0x80, 0x00, 0xB8, 0x38]) for _ in range(64))))
    add("nv-scales-all-values", nv(g, "v.weight", 64, 64, scales=bytes(range(256))))
    add("nv-scales-equal", nv(g, "q.weight", 64, 128, scales=bytes([0x40]) * 512))
    add("nv-random-values", [("r.weight", "U8", [16, 32], g.raw(512)), ("r.weight_scale", "F8_E4M3", [16, 4], g.raw(64)),
                             ("r.weight_scale_2", "F32", [], g.f32([1.0]))])
    # A module with several FP4 tensors, each with its scales, found by the
    # module rule (TensorRT-LLM names), and one whose scales are ambiguous.
    s1, s2 = g.e4m3_scales(32), g.e4m3_scales(32)
    add("nv-trtllm-names", [("m.weight", "U8", [8, 32], g.fp4_blocks(s1, 8)), ("m.weights_scaling_factor", "F8_E4M3", [8, 4], s1),
                            ("k.a", "U8", [8, 32], g.fp4_blocks(s2, 8)), ("k.b", "U8", [8, 32], g.fp4_blocks(s2, 8)),
                            ("k.a_sc", "F8_E4M3", [8, 4], s2), ("k.b_sc", "F8_E4M3", [8, 4], s2),
                            ("k.scale_x", "F8_E4M3", [8, 4], s2)])
    # compressed-tensors: weight_packed + weight_scale + weight_global_scale.
    s = g.e4m3_scales(64)
    add("nv-compressed-tensors", [("c.weight_packed", "U8", [16, 32], g.fp4_blocks(s, 8)), ("c.weight_scale", "F8_E4M3", [16, 4], s),
                                  ("c.weight_global_scale", "F32", [1], g.f32([100.0]))])
    # An INT4 compressed-tensors layout: I32 words, BF16 scales (no pairing).
    add("int4-compressed-tensors", [("c.weight_packed", "I32", [16, 8], g.raw(512)), ("c.weight_scale", "BF16", [16, 2], g.bf16(32)),
                                    ("c.weight_shape", "I64", [2], struct.pack("<2q", 16, 64))])
    # Chains: a scale tensor that has scales of its own by name; and a
    # scale tensor whose own "_scale" partner fits it.
    s = g.e4m3_scales(64)
    add("chain-nv", [("w", "U8", [16, 32], g.fp4_blocks(s, 8)), ("w_scale", "U8", [16, 4], s),
                     ("w_scale_scale", "U8", [8], g.e4m3_scales(8))])
    # (Scales of 4 KiB: chunks that stay grouped, not small ones coded as a stream.)
    s = g.e8m0_scales(4096)
    add("chain-mx", [("w_blocks", "U8", [4096, 16], g.fp4_blocks(s, 16)), ("w_scales", "U8", [4096], s),
                     ("w_scales_scale", "U8", [256], g.e8m0_scales(256))])
    s = g.e8m0_scales(256)
    add("chain-mx-3", [("w", "U8", [256, 16], g.fp4_blocks(s, 16)), ("w_scale", "U8", [256], s),
                       ("w_scale_scale", "U8", [16], g.e8m0_scales(16)), ("w_scale_scale_scale", "U8", [1], b"\x7f")])

    # --- FP8 ---------------------------------------------------------------
    add("fp8-deepseek", fp8_block(g, "model.layers.0.self_attn.q_proj", 300, 520))
    add("fp8-deepseek-1x1", fp8_block(g, "a", 1, 1) + fp8_block(g, "b", 1, 200) + fp8_block(g, "c", 200, 1))
    add("fp8-deepseek-bad-scale", fp8_block(g, "a", 130, 130, scale_shape=[1, 1]) + fp8_block(g, "b", 130, 130, scale_shape=[2, 3])
        + fp8_block(g, "c", 64, 64, scale_dtype="BF16") + fp8_block(g, "d", 64, 64, scale_shape=[]))
    add("fp8-e5m2-scale-inv", fp8_block(g, "e", 257, 129, dtype="F8_E5M2"))
    add("fp8-per-tensor", [("p.weight", "F8_E4M3", [64, 48], g.e4m3(3072)), ("p.weight_scale", "F32", [], g.f32([0.01])),
                           ("p.input_scale", "F32", [1], g.f32([0.02]))])
    add("fp8-per-channel", [("p.weight", "F8_E4M3", [64, 48], g.e4m3(3072)), ("p.weight_scale", "F32", [64, 1], g.raw(256)),
                            ("q.weight", "F8_E4M3", [64, 48], g.e4m3(3072)), ("q.weight_scale", "BF16", [64], g.bf16(64))])
    add("fp8-e4m3-scale-u8", [("p.weight", "F8_E4M3", [64, 16], g.e4m3(1024)), ("p.weight_scale", "U8", [64], g.e8m0_scales(64))])
    add("fp8-special", [("s.weight", "F8_E4M3", [32, 32], bytes(g.r.choice([0x7F, 0xFF, 0x80, 0, 0x7E]) for _ in range(1024))),
                        ("t.weight", "F8_E5M2", [32, 32], bytes(g.r.choice([0x7C, 0xFC, 0x7F, 0xFF, 0x80]) for _ in range(1024))),
                        ("u.weight", "F8_E4M3", [1], b"\x7f"), ("v.weight", "F8_E4M3", [], b"\x80"),
                        ("w.weight", "F8_E4M3", [4, 0], b""), ("x.weight", "F8_E8M0", [33], bytes([0xFF]) * 33)])
    add("fp8-high-dims", [("h.weight", "F8_E4M3", [3, 5, 7, 11], g.e4m3(1155)), ("h.weight_scale", "F32", [3, 1, 1, 1], g.raw(12)),
                          ("i.weight", "F8_E5M2", [2, 1, 1, 1, 300], g.e5m2(600))])

    # --- other dtypes alongside, and random bytes everywhere ----------------
    add("mixed-dtypes", mx(g, "m", [10], 3) + nv(g, "n.weight", 8, 32) + [
        ("b", "BOOL", [37], bytes(g.r.getrandbits(1) for _ in range(37))),
        ("i64", "I64", [5, 3], g.raw(120)), ("u64", "U64", [7], g.raw(56)), ("f64", "F64", [9], g.raw(72)),
        ("c64", "C64", [4], g.raw(32)), ("i16", "I16", [3], g.raw(6)), ("u32", "U32", [1], g.raw(4)),
        ("f6", "F6_E2M3", [4, 4], g.raw(12)), ("f4", "F4", [2, 3], g.raw(3)), ("bf", "BF16", [], g.raw(2)),
        ("f16", "F16", [0, 5], b"")])
    add("random-everything", [(f"t{i}", dt, [n], g.raw(nbytes(dt, [n]))) for i, (dt, n) in enumerate(
        [("U8", 4096), ("F8_E4M3", 5000), ("F8_E5M2", 333), ("BF16", 2049), ("F32", 1023), ("I64", 17), ("F8_E8M0", 300)])])
    add("metadata-only", [], order=None)

    # --- tensors over several 256 KiB chunks --------------------------------
    # MXFP4 blocks of 300 KiB (two chunks, a short second one) with 18.75
    # KiB of scales; NVFP4 blocks of 300 KiB with 37.5 KiB of E4M3 scales;
    # an FP8 weight over two chunks.
    add("chunks-mx", mx(g, "model.layers.1.mlp.experts.down_proj", [2, 60], 160))
    add("chunks-nv", nv(g, "big.weight", 600, 1024))
    add("chunks-fp8", fp8_block(g, "big", 600, 520))
    if big:
        # Scale tensors over several chunks (> 256 KiB: 4.5 MiB of blocks), and
        # blocks over a 4 MiB modelled chunk.
        add("big-mx-scales-span-chunks", mx(g, "model.layers.2.mlp.experts.gate_up_proj", [4, 720], 100))
        add("big-nv-scales-span-chunks", nv(g, "huge.weight", 2304, 2048))
        s = bytes(g.r.choice([0xFF, 0, 127, 120]) for _ in range(300000))
        add("big-mx-special-scales", [("s_blocks", "U8", [300000, 16], g.raw(4800000)), ("s_scales", "U8", [300000], s)])
        add("big-fp8-e5m2", fp8_block(g, "big", 1500, 3000, dtype="F8_E5M2"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--big", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    for name, tensors, order in cases(a.seed, a.big):
        with open(os.path.join(a.out_dir, name), "wb") as f:
            f.write(safetensors_bytes(tensors, order, {"format": "pt", "case": name}))


if __name__ == "__main__":
    main()
