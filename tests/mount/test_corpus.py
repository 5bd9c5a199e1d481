"""The packed shared corpus (<repo>/../shared/corpus) mounts as the original
directory: same listing and sizes, every file byte-identical through read
and mmap, every tensor equal through numpy memmaps, every file through a
torch storage mapped the way safetensors maps it."""
import os
import unittest

import numpy as np

from ptwmfs_testlib import (Mount, TempDir, corpus_dir, pack, regular_files, safetensors_tensors, sha256_mmap,
                            sha256_read)


class MountedCorpus(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.corpus = corpus_dir()
        if cls.corpus is None:
            raise unittest.SkipTest("no shared corpus at <repo>/../shared/corpus: corpus tests skipped")
        cls.store = os.path.join(cls.enterClassContext(TempDir()), "store")
        pack(cls.corpus, cls.store)
        cls.mount = cls.enterClassContext(Mount(cls.store))
        cls.files = regular_files(cls.corpus)
        cls.safetensors = [f for f in cls.files if f.endswith(".safetensors")]

    def test_listing_and_sizes_match(self):
        def sizes(root):
            return {rel: os.path.getsize(os.path.join(root, rel)) for rel in regular_files(root)}

        self.assertEqual(sorted(os.listdir(self.mount.path)), sorted(os.listdir(self.corpus)))
        self.assertEqual(sizes(self.mount.path), sizes(self.corpus))

    def test_every_file_identical_through_read_and_mmap(self):
        for rel in self.files:
            with self.subTest(file=rel):
                want = sha256_read(os.path.join(self.corpus, rel))
                self.assertEqual(sha256_read(self.mount / rel), want)
                self.assertEqual(sha256_mmap(self.mount / rel), want)
                self.assertEqual(sha256_mmap(self.mount / rel, private=True), want)

    def test_every_tensor_equal_through_numpy_memmap(self):
        for rel in self.safetensors:
            original = os.path.join(self.corpus, rel)
            for name, (_, _, begin, end) in safetensors_tensors(original).items():
                if begin == end:
                    continue
                with self.subTest(file=rel, tensor=name):
                    want = np.memmap(original, dtype=np.uint8, mode="r", offset=begin, shape=(end - begin,))
                    got = np.memmap(self.mount / rel, dtype=np.uint8, mode="r", offset=begin, shape=(end - begin,))
                    np.testing.assert_array_equal(got, want)

    def test_torch_storage_of_every_file_equals_original(self):
        try:
            import torch
        except Exception as e:  # noqa: BLE001 - any import failure means no torch here
            self.skipTest(f"torch not importable: {e}")
        for rel in self.safetensors:
            with self.subTest(file=rel):
                path = self.mount / rel
                storage = torch.ByteStorage.from_file(path, shared=False, size=os.path.getsize(path))
                got = torch.empty(0, dtype=torch.uint8).set_(storage).numpy()
                want = np.fromfile(os.path.join(self.corpus, rel), dtype=np.uint8)
                np.testing.assert_array_equal(got, want)


if __name__ == "__main__":
    unittest.main()
