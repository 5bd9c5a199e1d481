"""A store with one damaged chunk serves everything else; reads of the
damaged range fail with EIO, logged once with file and tensor. A store that
cannot be opened at all is shown as the plain .ptwm file it is."""
import errno
import os
import unittest

from ptwmfs_testlib import PAGE, Mount, TempDir, make_packed_model, safetensors_tensors, sha256_read, store_chunks


def read_page(path, offset):
    with open(path, "rb", buffering=0) as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_RANDOM)  # only this page
        return os.pread(f.fileno(), PAGE, offset)


class DamagedStore(unittest.TestCase):
    def setUp(self):
        self.original, self.store = make_packed_model(self.enterContext(TempDir()))
        store_file = os.path.join(self.store, "model.safetensors.ptwm")
        chunks = store_chunks(store_file)
        # A compressed chunk in the middle of the file: raw ones are checked too,
        # but a compressed one exercises the decoder's path.
        candidates = [c for c in chunks if not c["raw"]]
        self.damaged = candidates[len(candidates) // 2]
        plane = max(range(len(self.damaged["payload_lengths"])), key=lambda p: self.damaged["payload_lengths"][p])
        at = self.damaged["stored_offset"] + sum(self.damaged["payload_lengths"][:plane]) + \
            self.damaged["payload_lengths"][plane] // 2
        with open(store_file, "r+b") as f:
            byte = os.pread(f.fileno(), 1, at)
            os.pwrite(f.fileno(), bytes([byte[0] ^ 0x40]), at)
        tensors = safetensors_tensors(os.path.join(self.original, "model.safetensors"))
        self.damaged_tensor = next(name for name, (_, _, b, e) in tensors.items()
                                   if b <= self.damaged["original_offset"] < e)

    def test_damaged_range_fails_with_eio_and_the_rest_is_served(self):
        begin = self.damaged["original_offset"]
        end = begin + self.damaged["original_length"]
        original = os.path.join(self.original, "model.safetensors")
        size = os.path.getsize(original)
        with Mount(self.store) as mount, open(original, "rb") as want:
            path = mount / "model.safetensors"
            failed_pages = 0
            for offset in range(0, size, PAGE):
                touches_damage = offset < end and begin < offset + PAGE
                if touches_damage:
                    with self.assertRaises(OSError) as raised:
                        read_page(path, offset)
                    self.assertEqual(raised.exception.errno, errno.EIO)
                    failed_pages += 1
                else:
                    self.assertEqual(read_page(path, offset), os.pread(want.fileno(), PAGE, offset), offset)
            self.assertGreater(failed_pages, 0)
            # Other files are untouched, and the daemon is still serving.
            self.assertEqual(sha256_read(mount / "adapters/lora.safetensors"),
                             sha256_read(os.path.join(self.original, "adapters/lora.safetensors")))
            self.assertGreater(mount.stats()["reads"]["errors"], 0)
        log = mount.log()
        corrupt_lines = [line for line in log.splitlines() if "corrupt" in line]
        self.assertEqual(len(corrupt_lines), 1, log)  # once, however often it is read
        self.assertIn("model.safetensors.ptwm", corrupt_lines[0])
        self.assertIn(self.damaged_tensor, corrupt_lines[0])
        self.assertIn(str(begin), corrupt_lines[0])

    def test_unopenable_store_is_shown_as_plain_file(self):
        junk = os.path.join(self.store, "broken.safetensors.ptwm")
        with open(junk, "wb") as f:
            f.write(b"definitely not a store" * 100)
        # A hostile name: the log shows its escape as \x1b, never raw.
        with open(os.path.join(self.store, "evil\x1b[2J.ptwm"), "wb") as f:
            f.write(b"not one either")
        with Mount(self.store) as mount:
            names = os.listdir(mount.path)
            self.assertIn("broken.safetensors.ptwm", names)
            self.assertNotIn("broken.safetensors", names)
            self.assertEqual(sha256_read(mount / "broken.safetensors.ptwm"), sha256_read(junk))
            self.assertEqual(sha256_read(mount / "adapters/lora.safetensors"),
                             sha256_read(os.path.join(self.original, "adapters/lora.safetensors")))
        self.assertIn("broken.safetensors.ptwm", mount.log())
        self.assertIn("evil\\x1b[2J.ptwm: not a usable store", mount.log())
        self.assertNotIn("\x1b", mount.log())


if __name__ == "__main__":
    unittest.main()
