#!/usr/bin/env python3
"""Low-precision layouts the tuning never saw (tests/data/make_layouts.py: MXFP4,
NVFP4 and FP8 files whose scales do not fit, odd and empty shapes, NaN scale
bytes, chains and look-alikes of names, tensors over several chunks, other
dtypes alongside) come back byte for byte at every level and chunk size, and
verify; a pairing that does not fit is not taken, quietly. Fixed seed, no
corpus, a few seconds."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
import make_layouts  # noqa: E402

TOOL = os.environ.get("PTWMFS_TOOL", "build/tools/ptwmfs-tool/ptwmfs-tool")

# Per file, the role inspect gives tensors by the pairs the store found
# (None: no role). Pairs that fit are taken; those that do not, are not.
EXPECTED_ROLES = {
    "mx-gptoss-4d": {"model.layers.0.mlp.experts.gate_up_proj_blocks": "fp4-blocks",
                     "model.layers.0.mlp.experts.gate_up_proj_scales": "block-scales",
                     "model.layers.0.mlp.experts.down_proj_blocks": "fp4-blocks",
                     "model.layers.0.mlp.experts.down_proj_scales": "block-scales"},
    "mx-scales-transposed": {"a_blocks": "fp4-blocks", "a_scales": "block-scales"},
    "mx-scales-short-row": {"a_blocks": None, "a_scales": None},
    "mx-scales-extra-group": {"a_blocks": None, "a_scales": None},
    "mx-scales-bf16": {"a_blocks": None},
    "mx-scales-f32": {"a_blocks": None},
    "mx-scales-i8": {"a_blocks": None},
    "mx-f4-blocks": {"x_blocks": "fp4-blocks"},
    "mx-empty": {"e_blocks": None, "f_blocks": None, "g_blocks": None},
    "mx-scales-far": {"p_blocks": "fp4-blocks", "q_blocks": "fp4-blocks"},
    "mx-unicode-names": {"модель.слой.0.专家_blocks": "fp4-blocks", "w\u00e9ights \u2603.blocks": "fp4-blocks"},
    "nv-basic-scalar-s2": {"model.layers.0.mlp.down_proj.weight": "fp4-blocks",
                           "model.layers.0.mlp.down_proj.weight_scale": "block-scales",
                           "model.layers.0.mlp.down_proj.weight_scale_2": None},
    "nv-no-s2": {"l.weight": "fp4-blocks"},
    "nv-cols-40": {"l.weight": None},
    "nv-scale-f32": {"l.weight": None},
    "nv-scale-e5m2": {"l.weight": None},
    "nv-scale-per-tensor": {"l.weight": None},
    "nv-compressed-tensors": {"c.weight_packed": "fp4-blocks", "c.weight_scale": "block-scales"},
    "int4-compressed-tensors": {"c.weight_packed": None, "c.weight_scale": None},
    # A chain of names pairs its head only (a store whose scale tensor is
    # grouped itself cannot be read).
    "chain-nv": {"w": "fp4-blocks", "w_scale": "block-scales", "w_scale_scale": None},
    "chain-mx": {"w_blocks": "fp4-blocks", "w_scales": "block-scales", "w_scales_scale": None},
    "chain-mx-3": {"w": "fp4-blocks", "w_scale": "block-scales", "w_scale_scale": None, "w_scale_scale_scale": None},
    "fp8-deepseek": {"model.layers.0.self_attn.q_proj.weight": None},
    "fp8-e5m2-scale-inv": {"e.weight": None},
    "chunks-mx": {"model.layers.1.mlp.experts.down_proj_blocks": "fp4-blocks"},
    "chunks-nv": {"big.weight": "fp4-blocks"},
}

# Each pass packs the whole directory with these options.
PASSES = [[], ["-l", "1"], ["-l", "9"], ["--chunk-size", "4K"], ["-l", "9", "--chunk-size", "5000"]]


def run(*args):
    p = subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} failed ({p.returncode}): {p.stdout}{p.stderr}")
    return p


class LayoutsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="ptwm-layouts-"))
        cls.src = cls.tmp / "src"
        cls.src.mkdir()
        cls.cases = make_layouts.cases(seed=1)
        for name, tensors, order in cls.cases:
            (cls.src / name).write_bytes(make_layouts.safetensors_bytes(tensors, order, {"case": name}))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_every_file_round_trips_and_verifies_at_every_level_and_chunk_size(self):
        for i, options in enumerate(PASSES):
            with self.subTest(options=options):
                packed, back = self.tmp / f"packed{i}", self.tmp / f"back{i}"
                run("pack", "-q", *options, self.src, packed)
                for name, _, _ in self.cases:
                    self.assertTrue((packed / (name + ".ptwm")).is_file(), f"{name} was not packed as a store")
                run("unpack", "-q", packed, back)
                for name, _, _ in self.cases:
                    self.assertEqual((back / name).read_bytes(), (self.src / name).read_bytes(),
                                     f"{name} packed with {options} does not come back byte for byte")
                p = subprocess.run([TOOL, "verify", packed, "--against", self.src], capture_output=True, text=True)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertNotIn("FAILED", p.stdout)
                shutil.rmtree(back)
                if i:
                    shutil.rmtree(packed)

    def test_inspect_reads_every_store_and_pairs_only_what_fits(self):
        packed = self.tmp / "inspected"
        run("pack", "-q", self.src, packed)
        seen = set()
        for name, tensors, _ in self.cases:
            case = name[:-len(".safetensors")]
            with self.subTest(case=case):
                report = json.loads(run("inspect", "--json", packed / (name + ".ptwm")).stdout)
                roles = {t["name"]: t.get("role") for t in report["tensors"]}
                self.assertEqual(sorted(roles), sorted(t[0] for t in tensors))
                for tensor, role in EXPECTED_ROLES.get(case, {}).items():
                    self.assertEqual(roles[tensor], role, f"{case}: {tensor}")
                seen.add(case)
        self.assertEqual(set(EXPECTED_ROLES) - seen, set(), "expectations for files the generator no longer makes")


if __name__ == "__main__":
    unittest.main()
