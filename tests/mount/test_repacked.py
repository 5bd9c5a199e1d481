"""A store directory packed again while it is mounted: the mount keeps the
tree it found at mount (its listing, its stores' open files), so a plain
file that is no longer the one it found fails with EIO instead of serving
its new bytes beside the old tree."""
import errno
import os
import unittest

from ptwmfs_testlib import Mount, TempDir, make_packed_model, pack, sha256_read


class PackedAgainWhileMounted(unittest.TestCase):
    def test_a_replaced_plain_file_fails_with_eio_not_new_bytes(self):
        with TempDir() as tmp:
            original, store = make_packed_model(tmp, scale=1)
            config = os.path.join(original, "config.json")
            with open(config, "rb") as f:
                old = f.read()
            weights = sha256_read(os.path.join(original, "model.safetensors"))
            with Mount(store) as mount:
                # A new revision: another config of the same size (a Hugging
                # Face cache's refs/main naming a new snapshot is one), packed
                # over the mounted tree.
                new = old.replace(b"{", b"[", 1) if b"{" in old else b"x" * len(old)
                self.assertNotEqual(new, old)
                with open(config, "wb") as f:
                    f.write(new)
                pack(original, store)
                with open(os.path.join(store, "config.json"), "rb") as f:
                    self.assertEqual(f.read(), new, "the store directory has the new config")
                with self.assertRaises(OSError) as raised:
                    with open(mount / "config.json", "rb") as f:
                        f.read()
                self.assertEqual(raised.exception.errno, errno.EIO)
                # The store opened at mount still serves the weights it had.
                self.assertEqual(sha256_read(mount / "model.safetensors"), weights)
                self.assertEqual(mount.log().count("config.json: changed in the store directory since the mount"), 1,
                                 mount.log())


if __name__ == "__main__":
    unittest.main()
