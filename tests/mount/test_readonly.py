"""The mount is read-only: every kind of modification fails with EROFS.
Symlinks are shown as they are, never followed by the daemon."""
import errno
import os
import shutil
import unittest

from ptwmfs_testlib import Mount, TempDir, make_packed_model


class ReadOnly(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        workdir = cls.enterClassContext(TempDir())
        cls.original, cls.store = make_packed_model(workdir, scale=1)
        # Links pointing out of the store directory stay links.
        os.symlink("/etc/passwd", os.path.join(cls.store, "absolute-link"))
        os.symlink("../../outside", os.path.join(cls.store, "adapters", "escaping-link"))
        cls.mount = cls.enterClassContext(Mount(cls.store))

    def assert_erofs(self, operation, *args):
        with self.assertRaises(OSError) as raised:
            operation(*args)
        self.assertEqual(raised.exception.errno, errno.EROFS, f"{operation.__name__}{args}")

    def test_modifications_fail_with_erofs(self):
        m = self.mount
        for flags in (os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_TRUNC, os.O_WRONLY | os.O_APPEND):
            for name in ("model.safetensors", "config.json"):
                with self.subTest(flags=flags, file=name):
                    self.assert_erofs(os.open, m / name, flags)
        self.assert_erofs(os.open, m / "new-file", os.O_WRONLY | os.O_CREAT, 0o644)
        self.assert_erofs(os.mkdir, m / "new-dir")
        self.assert_erofs(os.unlink, m / "config.json")
        self.assert_erofs(os.rmdir, m / "adapters")
        self.assert_erofs(os.rename, m / "config.json", m / "renamed.json")
        self.assert_erofs(os.chmod, m / "model.safetensors", 0o777)
        self.assert_erofs(os.truncate, m / "model.safetensors", 0)
        self.assert_erofs(os.symlink, "x", m / "new-link")
        self.assert_erofs(os.link, m / "config.json", m / "hard-link")
        self.assert_erofs(os.utime, m / "config.json", (0, 0))
        self.assert_erofs(os.setxattr, m / "config.json", "user.test", b"1")

    def test_links_out_of_the_store_are_shown_not_followed(self):
        self.assertEqual(os.readlink(self.mount / "absolute-link"), "/etc/passwd")
        self.assertEqual(os.readlink(self.mount / "adapters/escaping-link"), "../../outside")
        self.assertTrue(os.path.islink(self.mount / "adapters/escaping-link"))

    def test_store_suffix_is_hidden_and_plain_twin_shadowed(self):
        names = os.listdir(self.mount.path)
        self.assertIn("model.safetensors", names)
        self.assertFalse(any(n.endswith(".ptwm") for n in names), names)


class StoreShadowsPlainTwin(unittest.TestCase):
    def test_store_wins_over_plain_file_of_same_name(self):
        with TempDir() as tmp:
            original, store = make_packed_model(tmp, scale=1)
            with open(os.path.join(store, "model.safetensors"), "wb") as f:
                f.write(b"stale plain copy")
            with Mount(store) as mount:
                self.assertEqual(os.listdir(mount.path).count("model.safetensors"), 1)
                self.assertEqual(os.path.getsize(mount / "model.safetensors"),
                                 os.path.getsize(os.path.join(original, "model.safetensors")))
                self.assertIn("model.safetensors: hidden by the store", mount.log())

    def test_stores_that_would_show_as_dot_names_stay_plain_files(self):
        # `..ptwm` would be shown as `.`, `...ptwm` as `..`: a second `.` and
        # `..` in the listing, and files no path could reach.
        with TempDir() as tmp:
            _, store = make_packed_model(tmp, scale=1)
            packed = os.path.join(store, "model.safetensors.ptwm")
            for name in ["..ptwm", "...ptwm"]:
                shutil.copyfile(packed, os.path.join(store, name))
            with Mount(store) as mount:
                names = os.listdir(mount.path)
                for name in ["..ptwm", "...ptwm"]:
                    self.assertIn(name, names)
                    self.assertEqual(os.path.getsize(mount / name), os.path.getsize(packed))
                self.assertNotIn(".", names)
                self.assertNotIn("..", names)
                self.assertIn("a store would be shown as '.', shown as the plain file it is", mount.log())


if __name__ == "__main__":
    unittest.main()
