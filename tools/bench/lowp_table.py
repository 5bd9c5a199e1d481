#!/usr/bin/env python3
"""Issue 13's target table for low-precision files (MXFP4, NVFP4, FP8).

    tools/bench/lowp_table.py [--build DIR] [--level N] [--speed] FILE...

Per file: packs it with ptwmfs-tool (at --level, default the tool's), reads
`ptwmfs-tool inspect --json` and prints
  - block scales: ours / order-0 bound / zstd -19 of each scale tensor alone
    (summed), as ratios of the scale bytes, and which of the two peers is the
    target (the smaller);
  - FP4 values: ours / order-0 per-plane bound;
  - the whole file: ours / zstd -19;
  - FP8 tensors: ours / whole-byte order-0 bound (taken per tensor);
and with --speed the one-thread in-memory decode of codec_bench (ours and
libzstd -3 of the same file). Needs the zstd CLI and numpy (run it with a
venv's python). Nothing is written outside a temporary directory.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return 8 + n, json.loads(f.read(n))


def zstd19(data):
    return len(subprocess.run(["zstd", "-19", "-q", "-c", "--no-check"], input=data, stdout=subprocess.PIPE,
                              check=True).stdout)


def byte_entropy_bytes(a):
    c = np.bincount(np.frombuffer(a, dtype=np.uint8), minlength=256).astype(np.float64)
    c = c[c > 0]
    return float(-(c * np.log2(c / c.sum())).sum() / 8)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(here, "..", "..", "build"))
    ap.add_argument("--level", type=int)
    ap.add_argument("--speed", action="store_true", help="also run codec_bench for the decode speeds")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    tool = os.path.join(a.build, "tools", "ptwmfs-tool", "ptwmfs-tool")
    rows = []
    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        for path in a.files:
            store = os.path.join(tmp, "s.ptwm")
            cmd = [tool, "pack", "-q", "-j1", path, store] + (["--level", str(a.level)] if a.level else [])
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            doc = json.loads(subprocess.run([tool, "inspect", "--json", store], check=True,
                                            stdout=subprocess.PIPE).stdout)
            start, h = header(path)
            with open(path, "rb") as f:
                data = f.read()
            r = {"file": os.path.basename(path), "size": len(data), "ours": doc["stored_bytes"] / len(data),
                 "zstd19": zstd19(data) / len(data)}
            scales = [t for t in doc["tensors"] if t.get("role") == "block-scales"]
            if scales:
                orig = sum(t["original_bytes"] for t in scales)
                z = 0
                for t in scales:
                    a0, b0 = h[t["name"]]["data_offsets"]
                    z += zstd19(data[start + a0:start + b0])
                bs = doc["block_scales"]
                r["scales"] = {"ours": bs["stored_bytes"] / orig, "bound": bs["order0_bound_bytes"] / orig, "zstd19": z / orig}
                fb = doc["fp4_blocks"]
                r["fp4"] = {"ours": fb["ratio"], "bound": fb["order0_bound_ratio"]}
            f8 = [t for t in doc["tensors"] if t["dtype"] in ("F8_E4M3", "F8_E5M2") and t.get("role") != "block-scales"]
            if f8:
                orig = sum(t["original_bytes"] for t in f8)
                bound = 0.0
                for t in f8:
                    a0, b0 = h[t["name"]]["data_offsets"]
                    bound += byte_entropy_bytes(data[start + a0:start + b0])
                r["f8"] = {"ours": sum(t["stored_bytes"] for t in f8) / orig, "bound": bound / orig}
            if a.speed and f8:
                bench = os.path.join(a.build, "tools", "bench", "codec_bench")
                out = subprocess.run([bench, "--json", "--no-cli", "--no-zipnn", "--reps", "5", "--threads", "1", path]
                                     + (["--level", str(a.level)] if a.level else []),
                                     check=True, stdout=subprocess.PIPE).stdout
                r["speed"] = json.loads(out)
            rows.append(r)
            print(json.dumps(r) if a.json else fmt(r), flush=True)


def fmt(r):
    s = f"{r['file']:44s} whole {r['ours']:.4f} vs zstd-19 {r['zstd19']:.4f} {'OK' if r['ours'] < r['zstd19'] else 'ABOVE'}"
    if "scales" in r:
        sc = r["scales"]
        tgt = min(sc["bound"], sc["zstd19"])
        s += f" | scales {sc['ours']:.4f} / bound {sc['bound']:.4f} / zstd-19 {sc['zstd19']:.4f} {'OK' if sc['ours'] <= tgt else 'ABOVE'}"
        fp = r["fp4"]
        s += f" | fp4 {fp['ours']:.4f} / {fp['bound']:.4f} {'OK' if fp['ours'] <= fp['bound'] else 'ABOVE'}"
    if "f8" in r:
        s += f" | f8 {r['f8']['ours']:.4f} / byte bound {r['f8']['bound']:.4f} {'OK' if r['f8']['ours'] <= r['f8']['bound'] else 'ABOVE'}"
    if "speed" in r:
        m = r["speed"][0]["in_memory_median_mbps"]
        x = m["unpack1"] / m["zstd3_decompress"]
        s += f" | decode {m['unpack1']:.0f} / zstd -d {m['zstd3_decompress']:.0f} MB/s {x:.2f}x {'OK' if x >= 1 else 'BELOW'}"
    return s


if __name__ == "__main__":
    main()
