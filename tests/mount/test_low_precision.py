"""Low-precision checkpoints of every format issue 13 names, packed as one
model directory and mounted: the corpus's FP8, MXFP4 and NVFP4 files, the
variants tools/bench/derive_variants.py derives from every corpus model
(MXFP4, NVFP4, FP8 E4M3 with per-tensor, per-channel and DeepSeek-V3 128x128
block scales, FP8 E5M2) and its large-model layer (a gpt-oss-sized
[2880, 5760] weight, whose scale tensors span several chunks), and the
derived MXFP4 and NVFP4 files again under compressed-tensors' names
(llm-compressor's checkpoints: X.weight_packed, X.weight_scale,
X.weight_global_scale) and the NVFP4 ones under TensorRT-LLM's (X.weight,
X.weights_scaling_factor, X.weights_scaling_factor_2), which must code as
the exporters' names do.

Every file reads back byte-identical through read and mmap. The sizes the issue sets as targets, which
no later change may lose, are asserted on the stores the mount serves:
FP8 files at or below their whole-byte order-0 bound, FP4 values at or
below their order-0 bound, every MXFP4/NVFP4 file and its block scales
(each scale tensor alone) below zstd -19."""
import json
import os
import shutil
import struct
import subprocess
import sys
import unittest

import numpy as np

from ptwmfs_testlib import (SOURCE_ROOT, Mount, TempDir, corpus_dir, executable, pack, regular_files,
                            safetensors_tensors, sha256_mmap, sha256_read)

DERIVE = os.path.join(SOURCE_ROOT, "tools", "bench", "derive_variants.py")
LOW_PRECISION = ("F8_E4M3", "MXFP4", "NVFP4")  # the corpus's own low-precision files, by name


def order0_bytes(data):
    """Order-0 entropy of a byte array, in bytes."""
    counts = np.bincount(np.frombuffer(data, dtype=np.uint8), minlength=256)
    counts = counts[counts > 0].astype(np.float64)
    return float(-(counts * np.log2(counts / counts.sum())).sum()) / 8


def zstd19_size(data):
    # --stream-size: the level's parameters fitted to the input, as for a file
    # (on stdin zstd -19 otherwise sets up for any size: 0.1 s a call).
    return len(subprocess.run(["zstd", "-19", "-q", "-c", f"--stream-size={len(data)}"], input=data, check=True,
                              capture_output=True).stdout)


def write_renamed(src, dst, rename):
    """A copy of safetensors file `src` whose tensors are named rename(name,
    header): the same bytes after a new header."""
    with open(src, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    renamed = {("__metadata__" if name == "__metadata__" else rename(name, header)): info for name, info in header.items()}
    text = json.dumps(renamed, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def compressed_tensors_name(name, header):
    """compressed-tensors' name of a derived MXFP4 (X.blocks, X.scales) or
    NVFP4 (X, X_scale, X_scale_2) tensor; others as they are."""
    for old, new in ((".blocks", ".weight_packed"), (".scales", ".weight_scale"), ("_scale_2", ".weight_global_scale"),
                     ("_scale", ".weight_scale")):
        if name.endswith(old) and (old != "_scale" or header[name]["dtype"] == "F8_E4M3"):
            return name[: -len(old)] + new
    if header[name]["dtype"] == "U8" and name + "_scale" in header:
        return name + ".weight_packed"
    return name


def trt_llm_name(name, header):
    """TensorRT-LLM's name of a derived NVFP4 tensor (X, X_scale, X_scale_2)."""
    for old, new in (("_scale_2", ".weights_scaling_factor_2"), ("_scale", ".weights_scaling_factor")):
        if name.endswith(old) and name[: -len(old)] in header:
            return name[: -len(old)] + new
    if header[name]["dtype"] == "U8" and name + "_scale" in header:
        return name + ".weight"
    return name


# Other exporters' names for the derived FP4 files: (suffix, formats, renaming).
RENAMINGS = (("compressed-tensors", ("MXFP4", "NVFP4"), compressed_tensors_name), ("trt-llm", ("NVFP4",), trt_llm_name))


def inspect(store):
    out = subprocess.run([executable("PTWMFS_TOOL"), "inspect", "--json", store], check=True, capture_output=True)
    return json.loads(out.stdout)


class MountedLowPrecision(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        corpus = corpus_dir()
        if corpus is None:
            raise unittest.SkipTest("no shared corpus at <repo>/../shared/corpus: the low-precision variants "
                                    "are derived from it; skipped")
        work = cls.enterClassContext(TempDir())
        cls.original = os.path.join(work, "model")
        os.mkdir(cls.original)
        for flags in ([], ["--large"]):
            subprocess.run([sys.executable, DERIVE, "--corpus", corpus, *flags, cls.original], check=True,
                           stdout=subprocess.DEVNULL)
        for model in ("esrgan-thick-x4", "movenet-thunder", "posenet"):
            for suffix, kinds, rename in RENAMINGS:
                for kind in kinds:
                    write_renamed(os.path.join(cls.original, f"{model}.{kind}.safetensors"),
                                  os.path.join(cls.original, f"{model}.{kind}-{suffix}.safetensors"), rename)
        for name in os.listdir(corpus):
            if name.endswith(".safetensors") and any(f".{kind}." in name for kind in LOW_PRECISION):
                shutil.copyfile(os.path.join(corpus, name), os.path.join(cls.original, "corpus." + name))
        cls.store = os.path.join(work, "store")
        pack(cls.original, cls.store)
        cls.mount = cls.enterClassContext(Mount(cls.store))
        cls.files = regular_files(cls.original)

    def stores(self, kinds):
        """(file, store, inspect report) of the files whose names hold one of `kinds`."""
        for rel in self.files:
            if any(f".{kind}" in rel for kind in kinds):
                store = os.path.join(self.store, rel + ".ptwm")
                yield rel, store, inspect(store)

    def test_every_format_is_there(self):
        names = " ".join(self.files)
        for kind in ("MXFP4", "NVFP4", "F8_E4M3-tensor", "F8_E4M3-channel", "F8_E4M3-block", "F8_E5M2",
                     "MXFP4-compressed-tensors", "NVFP4-compressed-tensors", "NVFP4-trt-llm"):
            for model in ("esrgan-thick-x4", "movenet-thunder", "posenet"):
                self.assertIn(f"{model}.{kind}.safetensors", names)
        for kind in ("MXFP4", "NVFP4", "F8_E4M3-block"):
            self.assertIn(f"gpt-oss-like.{kind}.safetensors", names)

    def test_every_file_identical_through_read_and_mmap(self):
        self.assertEqual(sorted(os.listdir(self.mount.path)), sorted(os.listdir(self.original)))
        for rel in self.files:
            with self.subTest(file=rel):
                want = sha256_read(os.path.join(self.original, rel))
                self.assertEqual(sha256_read(self.mount / rel), want)
                self.assertEqual(sha256_mmap(self.mount / rel), want)

    def test_fp8_files_at_or_below_their_whole_byte_bound(self):
        # The issue's bound of an FP8 file: its header, its FP8 tensors'
        # whole-byte order-0 entropy (per tensor) and the other tensors'
        # order-0 entropy per plane, as codec_bench's "bytebd" column.
        checked = 0
        for rel, _, report in self.stores(("F8_E4M3", "F8_E5M2")):
            original = os.path.join(self.original, rel)
            with open(original, "rb") as f:
                data = f.read()
            spans = safetensors_tensors(original)
            bound = report["order0_bound_bytes"]
            for tensor in report["tensors"]:
                if tensor["dtype"] in ("F8_E4M3", "F8_E5M2"):
                    _, _, begin, end = spans[tensor["name"]]
                    bound += order0_bytes(data[begin:end]) - sum(p["order0_bound_bytes"] for p in tensor["planes"])
            with self.subTest(file=rel):
                self.assertLessEqual(report["stored_bytes"], bound,
                                     f"{rel}: stored in {report['stored_bytes']} bytes, above its whole-byte "
                                     f"order-0 bound of {bound:.0f}")
            checked += 1
        self.assertEqual(checked, 4 * 3 + 1 + 3, "FP8 files: 4 derived per model, gpt-oss-like, 3 in the corpus")

    def test_fp4_values_at_or_below_their_bound_and_files_below_zstd_19(self):
        if shutil.which("zstd") is None:
            self.skipTest("no zstd command here (Debian's zstd package): the zstd -19 comparisons are skipped")
        checked = 0
        for rel, store, report in self.stores(("MXFP4", "NVFP4")):
            with self.subTest(file=rel):
                values, scales = report["fp4_blocks"], report["block_scales"]
                self.assertLessEqual(values["stored_bytes"], values["order0_bound_bytes"],
                                     f"{rel}: FP4 values above their order-0 bound")
                original = os.path.join(self.original, rel)
                with open(original, "rb") as f:
                    data = f.read()
                self.assertLess(os.path.getsize(store), zstd19_size(data), f"{rel}: store not below zstd -19")
                scale_tensors = [t for t in report["tensors"] if t.get("role") == "block-scales"]
                self.assertEqual(len(scale_tensors), scales["tensors"])
                spans = safetensors_tensors(original)
                zstd = sum(zstd19_size(data[spans[t["name"]][2]:spans[t["name"]][3]]) for t in scale_tensors)
                self.assertLess(scales["stored_bytes"], zstd,
                                f"{rel}: block scales not below zstd -19 of each scale tensor alone")
            checked += 1
        self.assertEqual(checked, 5 * 3 + 2 + 4,
                         "FP4 files: 2 derived per model and their 3 renamed copies, 2 gpt-oss-like, 4 in the corpus")

    def test_other_exporters_names_code_as_the_derived_names(self):
        for model in ("esrgan-thick-x4", "movenet-thunder", "posenet"):
            for suffix, kinds, _ in RENAMINGS:
                for kind in kinds:
                    with self.subTest(model=model, kind=kind, names=suffix):
                        ours, theirs = (inspect(os.path.join(self.store, f"{model}.{k}.safetensors.ptwm"))
                                        for k in (kind, f"{kind}-{suffix}"))
                        self.assertTrue("fp4_blocks" in theirs, f"no FP4 tensor paired with its scales under {suffix} names")
                        for part in ("fp4_blocks", "block_scales"):
                            self.assertEqual(theirs[part]["tensors"], ours[part]["tensors"], part)
                            self.assertEqual(theirs[part]["stored_bytes"], ours[part]["stored_bytes"], part)


if __name__ == "__main__":
    unittest.main()
