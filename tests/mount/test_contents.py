"""A mounted generated model reads back byte-identical through read, pread,
mmap (shared and private), numpy memmaps and torch storages, with the same
listing, sizes and symlinks as the original directory."""
import os
import random
import stat
import subprocess
import time
import unittest

import numpy as np

from ptwmfs_testlib import (Mount, TempDir, make_model, make_packed_model, pack, regular_files, safetensors_tensors, sha256_mmap,
                            sha256_read, store_chunks)

NUMPY_DTYPES = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32, "U8": np.uint8}


class MountedModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        workdir = cls.enterClassContext(TempDir())
        cls.original, cls.store = make_packed_model(workdir)
        cls.mount = cls.enterClassContext(Mount(cls.store))

    def test_listing_types_and_sizes_match(self):
        def describe(root):
            entries = {}
            for dirpath, dirnames, filenames in os.walk(root):
                for name in dirnames + filenames:
                    path = os.path.join(dirpath, name)
                    st = os.lstat(path)
                    link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
                    entries[os.path.relpath(path, root)] = (stat.S_IFMT(st.st_mode), st.st_size, link,
                                                            stat.S_IMODE(st.st_mode))
            return entries

        self.assertEqual(describe(self.original), describe(self.mount.path))
        self.assertNotIn("model.safetensors.ptwm", os.listdir(self.mount.path))

    def test_every_file_identical_through_read(self):
        for rel in regular_files(self.original):
            with self.subTest(file=rel):
                self.assertEqual(sha256_read(self.mount / rel), sha256_read(os.path.join(self.original, rel)))

    def test_every_file_identical_through_shared_and_private_mmap(self):
        for rel in regular_files(self.original):
            expected = sha256_read(os.path.join(self.original, rel))
            for private in (False, True):
                with self.subTest(file=rel, private=private):
                    self.assertEqual(sha256_mmap(self.mount / rel, private=private), expected)

    def test_symlink_resolves_inside_the_mount(self):
        link = self.mount / "lora-link.safetensors"
        self.assertTrue(os.path.islink(link))
        self.assertEqual(os.readlink(link), "adapters/lora.safetensors")
        self.assertEqual(sha256_read(link), sha256_read(os.path.join(self.original, "adapters", "lora.safetensors")))

    def test_random_preads_across_prefix_and_chunk_boundaries(self):
        original = os.path.join(self.original, "model.safetensors")
        chunks = store_chunks(os.path.join(self.store, "model.safetensors.ptwm"))
        size = os.path.getsize(original)
        boundaries = [0, 8, chunks[0]["original_offset"]] + [c["original_offset"] for c in chunks] + [size]
        rng = random.Random(7)
        ranges = [(max(0, b - 5), 10) for b in boundaries]
        ranges += [(rng.randrange(size), rng.choice([1, 4096, 70000, 300000, 1 << 20])) for _ in range(200)]
        ranges += [(size - 3, 100), (size, 10), (size + 4096, 10)]  # at and past the end
        with open(original, "rb") as want, open(self.mount / "model.safetensors", "rb") as got:
            for offset, length in ranges:
                with self.subTest(offset=offset, length=length):
                    self.assertEqual(os.pread(got.fileno(), length, offset), os.pread(want.fileno(), length, offset))

    def test_numpy_memmap_of_every_tensor_equals_original(self):
        for rel in ("model.safetensors", "adapters/lora.safetensors"):
            original = os.path.join(self.original, rel)
            for name, (dtype, shape, begin, end) in safetensors_tensors(original).items():
                with self.subTest(file=rel, tensor=name):
                    np_dtype = NUMPY_DTYPES[dtype]
                    want = np.memmap(original, dtype=np_dtype, mode="r", offset=begin, shape=shape)
                    got = np.memmap(self.mount / rel, dtype=np_dtype, mode="r", offset=begin, shape=shape)
                    self.assertEqual(got.nbytes, end - begin)
                    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))

    def test_torch_maps_whole_file_like_safetensors(self):
        try:
            import torch
        except Exception as e:  # noqa: BLE001 - any import failure means no torch here
            self.skipTest(f"torch not importable: {e}")
        for rel in ("model.safetensors", "adapters/lora.safetensors"):
            with self.subTest(file=rel):
                path = self.mount / rel
                size = os.path.getsize(path)
                # What safetensors' torch loader does to map a file.
                storage = torch.ByteStorage.from_file(path, shared=False, size=size)
                got = torch.empty(0, dtype=torch.uint8).set_(storage).numpy().tobytes()
                with open(os.path.join(self.original, rel), "rb") as f:
                    self.assertEqual(got, f.read())

    def test_stats_xattr_on_root(self):
        self.assertIn("user.ptwmfs.stats", os.listxattr(self.mount.path))
        stats = self.mount.stats()
        for key in ("hits", "misses", "bytes_decoded", "evictions", "decode_seconds"):
            self.assertIn(key, stats["cache"])
        for key in ("p50", "p90", "p99"):
            self.assertIn(key, stats["reads"]["latency_us"])


class MountedSource(unittest.TestCase):
    """What the mount shows of what it is given: one store (NAME.ptwm, shown
    alone as NAME), or a directory without any store (served as it is, with
    a notice: most likely the original given for the packed one)."""

    def test_a_store_mounted_alone_reads_back_byte_identical(self):
        with TempDir() as workdir:
            original, store = make_packed_model(workdir, scale=1)
            want = os.path.join(original, "model.safetensors")
            # Its directory holds other stores and files: none is shown.
            self.assertGreater(len(os.listdir(store)), 1)
            with Mount(os.path.join(store, "model.safetensors.ptwm")) as mount:
                self.assertEqual(os.listdir(mount.path), ["model.safetensors"])
                got = mount / "model.safetensors"
                self.assertEqual(os.path.getsize(got), os.path.getsize(want))
                self.assertEqual(sha256_read(got), sha256_read(want))
                self.assertEqual(sha256_mmap(got), sha256_read(want))

    def test_a_directory_without_stores_is_served_with_a_notice(self):
        with TempDir() as workdir:
            original, _ = make_packed_model(workdir, scale=1)
            with Mount(original) as mount:
                self.assertEqual(sorted(os.listdir(mount.path)), sorted(os.listdir(original)))
                self.assertEqual(sha256_read(mount / "model.safetensors"),
                                 sha256_read(os.path.join(original, "model.safetensors")))
                self.assertIn(f"{os.path.realpath(original)} holds no store (NAME.ptwm)", mount.log())


class ManyTinyTensors(unittest.TestCase):
    """A read that covers more than 1023 chunks (0-d scales, tiny biases: one
    chunk each) is one reply of more pieces than writev(2) takes: it must
    still be answered, with the right bytes, not hang its reader for good."""

    def test_read_covering_thousands_of_scalar_tensors(self):
        with TempDir() as workdir:
            original = os.path.join(workdir, "model")
            os.makedirs(original)
            path = os.path.join(original, "scales.safetensors")
            make_model.write_safetensors(path, [(f"layers.{i}.input_scale", "F32", [], np.array(i, "<f4"))
                                                for i in range(5000)])
            pack(original, os.path.join(workdir, "store"))
            with Mount(os.path.join(workdir, "store")) as mount:
                # In a child, so that a read that never comes back fails the
                # test instead of hanging it (the unmount then frees it).
                copy = os.path.join(workdir, "copy")
                reader = subprocess.Popen(["cp", mount / "scales.safetensors", copy])
                deadline = time.monotonic() + 30
                while reader.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.1)
                self.assertIsNotNone(reader.returncode, "the read through the mount did not come back")
                self.assertEqual(reader.returncode, 0)
                self.assertEqual(sha256_read(copy), sha256_read(path))


if __name__ == "__main__":
    unittest.main()
