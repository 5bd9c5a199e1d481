"""Reading one tensor decodes only the chunks covering it (seen through the
user.ptwmfs.stats counters), and the header is served without decoding."""
import os
import unittest

from ptwmfs_testlib import (PAGE, Mount, TempDir, chunks_overlapping, make_packed_model, safetensors_tensors,
                            store_chunks)


def read_range(path, begin, end):
    with open(path, "rb", buffering=0) as f:
        # No kernel readahead: only the pages asked for reach the daemon.
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
        return os.pread(f.fileno(), end - begin, begin)


class RandomAccess(unittest.TestCase):
    def setUp(self):
        self.original, self.store = make_packed_model(self.enterContext(TempDir()))
        self.chunks = store_chunks(os.path.join(self.store, "model.safetensors.ptwm"))
        self.tensors = safetensors_tensors(os.path.join(self.original, "model.safetensors"))

    def expected_decodes(self, begin, end):
        """Compressed chunks under [begin, end): the least that must be decoded,
        and the most (the kernel reads whole pages)."""
        least = [c for c in chunks_overlapping(self.chunks, begin, end) if not c["raw"]]
        most = [c for c in chunks_overlapping(self.chunks, begin // PAGE * PAGE, -(-end // PAGE) * PAGE)
                if not c["raw"]]
        return least, most

    def test_one_tensor_decodes_only_its_chunks(self):
        for name in ("model.layers.2.mlp.weight", "model.embed.weight", "model.layers.1.mlp.norm"):
            with self.subTest(tensor=name), Mount(self.store, "readahead=0") as mount:
                _, _, begin, end = self.tensors[name]
                data = read_range(mount / "model.safetensors", begin, end)
                with open(os.path.join(self.original, "model.safetensors"), "rb") as f:
                    self.assertEqual(data, os.pread(f.fileno(), end - begin, begin))

                least, most = self.expected_decodes(begin, end)
                self.assertLess(len(most), len(self.chunks) // 2, "test tensor too large for this test")
                cache = mount.stats()["cache"]
                self.assertGreaterEqual(cache["misses"], len(least))
                self.assertLessEqual(cache["misses"], len(most))
                self.assertGreaterEqual(cache["bytes_decoded"], sum(c["original_length"] for c in least))
                self.assertLessEqual(cache["bytes_decoded"], sum(c["original_length"] for c in most))

    def test_rereading_a_tensor_decodes_nothing_new(self):
        with Mount(self.store, "readahead=0") as mount:
            _, _, begin, end = self.tensors["model.layers.3.mlp.weight"]
            path = mount / "model.safetensors"
            read_range(path, begin, end)
            decoded = mount.stats()["cache"]["bytes_decoded"]
            # Dropping our pages makes the kernel ask again; the chunk cache answers.
            with open(path, "rb") as f:
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            read_range(path, begin, end)
            cache = mount.stats()["cache"]
            self.assertEqual(cache["bytes_decoded"], decoded)

    def test_raw_chunks_are_read_in_place(self):
        _, _, begin, end = self.tensors["model.noise"]
        raw = [c for c in chunks_overlapping(self.chunks, begin, end) if c["raw"]]
        self.assertTrue(raw, "the noise tensor should be stored raw")
        with Mount(self.store, "readahead=0") as mount:
            chunk = raw[len(raw) // 2]
            first = chunk["original_offset"] + PAGE
            for _ in range(2):  # first read checks the chunk's checksum, later ones pread
                data = read_range(mount / "model.safetensors", first, first + PAGE)
                with open(os.path.join(self.original, "model.safetensors"), "rb") as f:
                    self.assertEqual(data, os.pread(f.fileno(), PAGE, first))
            stats = mount.stats()
            self.assertEqual(stats["cache"]["misses"], 0)
            self.assertGreaterEqual(stats["reads"]["raw_bytes"], PAGE)


if __name__ == "__main__":
    unittest.main()
