#!/usr/bin/env python3
"""Derive more low-precision test files from every corpus model (issue 13).

    tools/bench/derive_variants.py [--corpus DIR] OUTDIR

Writes, per corpus model (its ORIGINAL file: esrgan F32, movenet F16,
posenet F32), into OUTDIR (a scratch directory: the files are never
committed):

  MODEL.MXFP4.safetensors       OCP MX: X.blocks U8 [nblocks, 16] + X.scales U8 (E8M0)
  MODEL.NVFP4.safetensors       ModelOpt: X U8 [rows, cols/2] + X_scale F8_E4M3 + X_scale_2 F32 []
  MODEL.F8_E4M3-tensor.safetensors   X F8_E4M3 + X_scale F32 [1] (per tensor)
  MODEL.F8_E4M3-channel.safetensors  X F8_E4M3 [out, in] + X_scale F32 [out, 1] (per output channel)
  MODEL.F8_E4M3-block.safetensors    X F8_E4M3 [out, in] + X.weight_scale_inv F32
                                     [ceil(out/128), ceil(in/128)] (DeepSeek-V3 layout)
  MODEL.F8_E5M2.safetensors     X F8_E5M2 + X_scale F32 [1] (per tensor)

following the recipes in the corpus README (RNE, saturating, no negative
zero codes; ndim < 2 tensors as BF16).

    tools/bench/derive_variants.py --large OUTDIR

writes instead, without the corpus, a large model's layer the corpus lacks:
gpt-oss-like.{MXFP4,NVFP4,F8_E4M3-block}.safetensors, one synthetic
[2880, 5760] weight (a gpt-oss expert's gate_up_proj shape; Gaussian, each
row at its own level, exp(N(0, 0.5)), seeded) through the same recipes:
8.8 / 9.3 / 16.6 MB; the FP4 files' scale tensors (506 KiB / 1 MiB) are
stored in several chunks, as large models' are. The per-channel and block FP8 files
hold 2-D weights [out, in] as PyTorch exporters do: a TensorFlow kernel
[kh, kw, in, out] becomes [out, kh*kw*in] (transposed), so a scale row is an
output channel. Needs numpy (a venv is fine: it is a bench tool, not a
build dependency).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

MODELS = {
    "esrgan-thick-x4": "esrgan-thick-x4.F32.safetensors",
    "movenet-thunder": "movenet-thunder.F16.safetensors",
    "posenet": "posenet.F32.safetensors",
}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        dt = {"F32": np.float32, "F16": np.float16}[info["dtype"]]
        out[name] = np.frombuffer(data[a:b], dtype=dt).astype(np.float32).reshape(info["shape"])
    return out


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, dtype string, shape, bytes)."""
    header = {"__metadata__": metadata}
    off = 0
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, _, raw in tensors:
            f.write(raw)
    os.replace(tmp, path)


def grid_quantiser(values):
    """RNE onto a sign-magnitude grid: values[code] for magnitude codes in
    ascending order; returns f(x) -> codes (sign << bits | magnitude code)."""
    grid = np.asarray(values, dtype=np.float64)
    sign_bit = 1 << int(np.ceil(np.log2(len(values))))

    def quantise(x):
        x = np.asarray(x, dtype=np.float64)
        a = np.minimum(np.abs(x), grid[-1])
        hi = np.clip(np.searchsorted(grid, a, side="left"), 0, len(grid) - 1)
        lo = np.maximum(hi - 1, 0)
        dlo, dhi = a - grid[lo], grid[hi] - a
        pick = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
        code = pick.astype(np.uint16)
        neg = (x < 0) & (code != 0)  # no negative zero codes
        return (code | np.where(neg, sign_bit, 0)).astype(np.uint8)

    return quantise


def minifloat_grid(exp_bits, man_bits, bias, max_code):
    vals = []
    for c in range(max_code + 1):
        e, m = c >> man_bits, c & ((1 << man_bits) - 1)
        vals.append((m / (1 << man_bits)) * 2.0 ** (1 - bias) if e == 0 else (1 + m / (1 << man_bits)) * 2.0 ** (e - bias))
    return vals


E4M3 = minifloat_grid(4, 3, 7, 126)  # 0x7F is NaN (E4M3FN), max 448
E5M2 = minifloat_grid(5, 2, 15, 123)  # 0x7C is inf, max 57344
FP4 = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
q_e4m3, q_e5m2, q_fp4 = grid_quantiser(E4M3), grid_quantiser(E5M2), grid_quantiser(FP4)
E4M3_VAL = np.array(E4M3 + [np.nan] + [-v for v in E4M3] + [np.nan])


def bf16(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).tobytes()


def f32(x):
    return np.ascontiguousarray(x, dtype=np.float32).tobytes()


def to_rows(w):
    """[kh, kw, in, out] -> [out, kh*kw*in] (PyTorch-like); 2-D [in, out] -> [out, in]."""
    return np.ascontiguousarray(w.reshape(-1, w.shape[-1]).T)


def pack_nibbles(codes):
    codes = codes.reshape(-1, 2)
    return (codes[:, 0] | (codes[:, 1] << 4)).astype(np.uint8)


def mxfp4(name, w):
    flat = w.reshape(-1).astype(np.float64)
    pad = (-flat.size) % 32
    blocks = np.concatenate([flat, np.zeros(pad)]).reshape(-1, 32)
    amax = np.abs(blocks).max(axis=1)
    with np.errstate(divide="ignore"):
        e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1))) - 2 + 127, 0)
    e = np.clip(e, 0, 254).astype(np.int64)
    scale = np.where(e > 0, 2.0 ** (e - 127), 1.0)
    codes = q_fp4(blocks / scale[:, None])
    return [(name + ".blocks", "U8", [blocks.shape[0], 16], pack_nibbles(codes).tobytes()),
            (name + ".scales", "U8", [blocks.shape[0]], e.astype(np.uint8).tobytes())], [list(w.shape), pad]


def nvfp4(name, w):
    rows = w.reshape(w.shape[0], -1).astype(np.float64)
    pad = (-rows.shape[1]) % 16
    rows = np.concatenate([rows, np.zeros((rows.shape[0], pad))], axis=1)
    amax = np.abs(rows).max()
    s2 = amax / (6 * 448) if amax > 0 else 1.0
    blocks = rows.reshape(rows.shape[0], -1, 16)
    sc_codes = q_e4m3(np.abs(blocks).max(axis=2) / 6 / s2)
    sc = np.abs(E4M3_VAL[sc_codes])
    denom = np.where(sc > 0, sc * s2, 1.0)
    codes = q_fp4(np.where(sc[:, :, None] > 0, blocks / denom[:, :, None], 0))
    return [(name, "U8", [rows.shape[0], rows.shape[1] // 2], pack_nibbles(codes).tobytes()),
            (name + "_scale", "F8_E4M3", list(sc_codes.shape), sc_codes.tobytes()),
            (name + "_scale_2", "F32", [], f32(np.float32(s2)))], [list(w.shape), pad]


def fp8_tensor(name, w, quant, fmax, dt):
    amax = float(np.abs(w).max())
    s = np.float32(amax / fmax if amax > 0 else 1.0)
    return [(name, dt, list(w.shape), quant(w / np.float64(s)).tobytes()), (name + "_scale", "F32", [1], f32(s))]


def fp8_channel(name, w):
    r = to_rows(w).astype(np.float64)
    amax = np.abs(r).max(axis=1)
    s = np.where(amax > 0, amax / 448, 1.0).astype(np.float32)
    return [(name, "F8_E4M3", list(r.shape), q_e4m3(r / s[:, None].astype(np.float64)).tobytes()),
            (name + "_scale", "F32", [r.shape[0], 1], f32(s))]


def fp8_block(name, w):
    r = to_rows(w).astype(np.float64)
    R, C = r.shape
    br, bc = -(-R // 128), -(-C // 128)
    p = np.zeros((br * 128, bc * 128))
    p[:R, :C] = r
    amax = np.abs(p.reshape(br, 128, bc, 128)).max(axis=(1, 3))
    s = np.where(amax > 0, amax / 448, 1.0).astype(np.float32)
    full = np.repeat(np.repeat(s.astype(np.float64), 128, axis=0), 128, axis=1)[:R, :C]
    return [(name, "F8_E4M3", [R, C], q_e4m3(r / full).tobytes()),
            (name + "_scale_inv", "F32", [br, bc], f32(s))]


VARIANTS = {
    "MXFP4": mxfp4,
    "NVFP4": nvfp4,
    "F8_E4M3-tensor": lambda n, w: (fp8_tensor(n, w, q_e4m3, 448.0, "F8_E4M3"), None),
    "F8_E4M3-channel": lambda n, w: (fp8_channel(n, w), None),
    "F8_E4M3-block": lambda n, w: (fp8_block(n, w), None),
    "F8_E5M2": lambda n, w: (fp8_tensor(n, w, q_e5m2, 57344.0, "F8_E5M2"), None),
}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=os.path.join(here, "..", "..", "..", "shared", "corpus"))
    ap.add_argument("--only", help="comma-separated variant names (default: all)")
    ap.add_argument("--large", action="store_true", help="write the gpt-oss-like MXFP4 / NVFP4 / FP8 block files only")
    ap.add_argument("outdir")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    if a.large:
        rng = np.random.default_rng(2880)
        w = rng.standard_normal((2880, 5760)) * np.exp(rng.normal(0, 0.5, (2880, 1))) * 0.02
        name = "model.layers.0.mlp.experts.gate_up_proj"
        for v in ("MXFP4", "NVFP4", "F8_E4M3-block"):
            # (fp8_block takes a kernel's [in, out] to [out, in]: the transpose keeps the rows.)
            ts, shape = VARIANTS[v](name, w if v != "F8_E4M3-block" else w.T)
            meta = {"source": "synthetic, per-row levels", "variant": v}
            if shape is not None:
                meta[("mxfp4" if v == "MXFP4" else "nvfp4") + "_shapes"] = json.dumps({name: shape})
            dest = os.path.join(a.outdir, f"gpt-oss-like.{v}.safetensors")
            write_safetensors(dest, ts, meta)
            print(f"{dest}: {os.path.getsize(dest)} bytes, {len(ts)} tensors", flush=True)
        return
    wanted = a.only.split(",") if a.only else list(VARIANTS)
    for model, src in MODELS.items():
        path = os.path.join(a.corpus, src)
        if not os.path.exists(path):
            sys.exit(f"derive_variants: {path} is missing (is the corpus at --corpus?)")
        tensors = read_safetensors(path)
        for v in wanted:
            out, shapes = [], {}
            for name in sorted(tensors):
                w = tensors[name]
                if w.ndim < 2:
                    out.append((name, "BF16", list(w.shape), bf16(w)))
                    continue
                ts, extra = VARIANTS[v](name, w)
                out += ts
                if extra is not None:
                    shapes[name] = extra
            meta = {"source": src, "variant": v}
            if shapes:
                meta[("mxfp4" if v == "MXFP4" else "nvfp4") + "_shapes"] = json.dumps(shapes)
            dest = os.path.join(a.outdir, f"{model}.{v}.safetensors")
            write_safetensors(dest, out, meta)
            print(f"{dest}: {os.path.getsize(dest)} bytes, {len(out)} tensors", flush=True)


if __name__ == "__main__":
    main()
