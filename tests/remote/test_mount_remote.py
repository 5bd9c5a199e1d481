#!/usr/bin/env python3
"""The daemon on a remote tree: `ptwmfs http://HOST/PATH/ MOUNTPOINT` over
nginx on loopback. Every file byte-identical through read and mmap; one
full read fetches at most 1.05x the packed bytes (counted by nginx); an
object replaced under the mount fails reads with EIO and the daemon lives;
a damaged disk-cache entry is fetched again; with the server gone a fresh
mount over the disk cache serves everything."""
import errno
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import remote_testlib as rt  # noqa: E402

sys.path.insert(0, os.path.join(rt.SOURCE_ROOT, "tests", "mount"))
import ptwmfs_testlib as mt  # noqa: E402

CORPUS = Path(rt.SOURCE_ROOT).parent / "shared" / "corpus"
TOOL = os.environ.get("PTWMFS_TOOL", os.path.join(rt.SOURCE_ROOT, "build", "tools", "ptwmfs-tool", "ptwmfs-tool"))


def files_below(root):
    out = []
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            if not p.is_symlink():
                out.append(p.relative_to(root))
    return sorted(out)


class MountOverHttp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="ptwm-rmount-"))
        cls.src = cls.tmp / "model"
        mt.make_model.make_model(str(cls.src), seed=5, scale=2)
        if CORPUS.is_dir():
            # Large enough (about 9 MiB stored) that most of its blocks are
            # fetched only when read, not at open.
            shutil.copy(CORPUS / "esrgan-thick-x4.BF16.safetensors", cls.src / "esrgan.BF16.safetensors")
            shutil.copy(CORPUS / "posenet.F8_E4M3.safetensors", cls.src / "posenet.F8.safetensors")
        os.symlink("esrgan.BF16.safetensors" if CORPUS.is_dir() else "model.safetensors", cls.src / "alias")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.work = Path(tempfile.mkdtemp(prefix="case-", dir=self.tmp))
        self.packed = self.work / "packed"
        subprocess.run([TOOL, "pack", "--manifest", self.src, self.packed], check=True, capture_output=True)
        self.cache = self.work / "cache"

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def options(self, extra=""):
        return f"disk_cache={self.cache},remote_timeout=5" + (f",{extra}" if extra else "")

    def assert_all_identical(self, mount, mmap_too=True):
        for rel in files_below(self.src):
            want = mt.sha256_read(self.src / rel)
            self.assertEqual(mt.sha256_read(mount / str(rel)), want, f"{rel} by read")
            if mmap_too:
                self.assertEqual(mt.sha256_mmap(mount / str(rel)), want, f"{rel} by mmap")
        self.assertEqual(os.readlink(mount / "alias"), os.readlink(self.src / "alias"))

    def test_every_file_identical_and_fetched_once(self):
        with rt.Nginx(self.packed) as web:
            with mt.Mount(web.url, self.options()) as m:
                self.assertEqual(sorted(os.listdir(m.path)), sorted(os.listdir(self.src)))
                for rel in files_below(self.src):
                    self.assertEqual(os.stat(m / str(rel)).st_size, os.stat(self.src / rel).st_size)
                self.assert_all_identical(m, mmap_too=False)
                fetched = web.body_bytes_sent()
                packed = sum(os.path.getsize(self.packed / f) for f in files_below(self.packed))
                self.assertLessEqual(fetched, 1.05 * packed, f"fetched {fetched} bytes for {packed} packed")
                remote = m.stats()["remote"]
                self.assertGreater(remote["requests"], 0)
                self.assertGreaterEqual(remote["bytes_fetched"], fetched * 0.95)
                print(f"fetched {fetched} bytes by nginx's count for {packed} packed "
                      f"({fetched / packed:.4f}); {remote}", file=sys.stderr)
                self.assert_all_identical(m)  # mmap too, now from the caches

    def test_damaged_disk_cache_entry_is_fetched_again(self):
        with rt.Nginx(self.packed) as web:
            with mt.Mount(web.url, self.options()) as m:
                self.assert_all_identical(m, mmap_too=False)
            entries = sorted(self.cache.glob("*.entry"), key=lambda p: p.stat().st_size)
            self.assertTrue(entries)
            for e in entries:  # flip one byte in the middle of every entry
                data = bytearray(e.read_bytes())
                data[len(data) // 2] ^= 0x20
                e.write_bytes(bytes(data))
            before = web.body_bytes_sent()
            with mt.Mount(web.url, self.options()) as m:
                self.assert_all_identical(m, mmap_too=False)
            self.assertGreater(web.body_bytes_sent(), before, "damaged entries were not fetched again")

    def test_server_gone_fresh_mount_serves_from_disk_cache(self):
        with rt.Nginx(self.packed) as web:
            url = web.url
            with mt.Mount(url, self.options()) as m:
                self.assert_all_identical(m, mmap_too=False)
        # nginx is stopped: nothing answers at that address any more.
        with mt.Mount(url, self.options("remote_timeout=2")) as m:
            self.assert_all_identical(m)

    @unittest.skipUnless(CORPUS.is_dir(), "needs ../shared/corpus for a store larger than the blocks read at open")
    def test_object_replaced_under_the_mount_fails_with_eio(self):
        with rt.Nginx(self.packed) as web:
            with mt.Mount(web.url, self.options()) as m:
                store = self.packed / "esrgan.BF16.safetensors.ptwm"
                other = self.work / "other.ptwm"
                subprocess.run([TOOL, "pack", "--level", "1", CORPUS / "esrgan-thick-x4.F16.safetensors", other],
                               check=True, capture_output=True)
                os.replace(other, store)  # new size and mtime: a new ETag
                with self.assertRaises(OSError) as raised:
                    mt.sha256_read(m / "esrgan.BF16.safetensors")
                self.assertEqual(raised.exception.errno, errno.EIO)
                self.assertIn("changed since it was opened", m.log())
                # The daemon lives and serves the rest.
                self.assertEqual(mt.sha256_read(m / "model.safetensors"), mt.sha256_read(self.src / "model.safetensors"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
