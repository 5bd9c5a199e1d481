#!/usr/bin/env python3
"""Against SeaweedFS on loopback: a tree packed again under a live mount is
never mixed into it (objects first read after the re-pack fail with EIO,
one log line; a fresh mount shows the new tree whole), and unpack or
verify of it fail rather than read two trees as one; a relative
disk_cache= holds the blocks after the daemon detaches; pack refuses a file
named as the manifest; a missing bucket is said as such; the disk cache's
byte count follows the damaged entries it drops; an interrupted re-pack says
that the prefix holds no tree."""
import errno
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import remote_testlib as rt  # noqa: E402

sys.path.insert(0, os.path.join(rt.SOURCE_ROOT, "tests", "mount"))
import ptwmfs_testlib as mt  # noqa: E402
from mount_guard import mounted, unmount  # noqa: E402

TOOL = os.environ.get("PTWMFS_TOOL", os.path.join(rt.SOURCE_ROOT, "build", "tools", "ptwmfs-tool", "ptwmfs-tool"))


def write_checkpoint(path, megabytes, seed, flip=False):
    """One BF16 tensor of seeded bytes; with flip, the same shape and other
    weights (a fine-tuned checkpoint: same size, same original size)."""
    import random
    data = bytearray(random.Random(seed).randbytes(megabytes << 20))
    if flip:
        for i in range(0, len(data), 4096):
            data[i] ^= 1
    header = json.dumps({"w": {"dtype": "BF16", "shape": [len(data) // 2], "data_offsets": [0, len(data)]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)


@unittest.skipUnless(rt.weed_path(), rt.WEED_MISSING)
class RepackRemote(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        rt.seaweedfs_for_class(cls, "ptwm-repack-")

    def fresh(self, name):
        return Path(tempfile.mkdtemp(prefix=name + "-", dir=self.tmp))

    def mountpoint(self):
        # Where Mount makes its own (a mount point is no place for the test's files).
        return Path(mt.tempfile.mkdtemp(prefix="ptwmfs-mnt-"))

    def two_versions(self):
        v1, v2 = self.fresh("v1"), self.fresh("v2")
        for i, seed in ((1, 11), (2, 12)):
            name = f"model-0000{i}-of-00002.safetensors"
            write_checkpoint(v1 / name, 3, seed)
            write_checkpoint(v2 / name, 3, seed, flip=True)
        (v1 / "config.json").write_text('{"v": 1}\n')
        (v2 / "config.json").write_text('{"v": 2}\n')  # the same size
        return v1, v2

    def test_a_repack_under_the_mount_is_never_mixed_into_it(self):
        v1, v2 = self.two_versions()
        url = "s3://models/repacked"
        subprocess.run([TOOL, "pack", "-q", v1, url], check=True)
        cache = self.fresh("cache")
        with mt.Mount(url, f"disk_cache={cache},remote_timeout=10") as m:
            first = "model-00001-of-00002.safetensors"
            self.assertEqual(mt.sha256_read(m / first), mt.sha256_read(v1 / first))
            subprocess.run([TOOL, "pack", "-q", v2, url], check=True)
            # Opened before: old bytes (the page cache) or EIO. Opened after:
            # EIO, never the new tree's bytes under the old tree's names.
            for name in ("model-00002-of-00002.safetensors", "config.json"):
                try:
                    got = (Path(m.path) / name).read_bytes()
                except OSError as e:
                    self.assertEqual(e.errno, errno.EIO)
                    continue
                self.assertEqual(got, (v1 / name).read_bytes(), f"{name}: the new tree's bytes in the old mount")
            self.assertEqual(mt.sha256_read(m / first), mt.sha256_read(v1 / first))
            # What failed for good is not asked for again, nor logged again.
            requests = m.stats()["remote"]["requests"]
            for name in ("model-00002-of-00002.safetensors", "config.json"):
                with self.assertRaises(OSError) as raised:
                    (Path(m.path) / name).read_bytes()
                self.assertEqual(raised.exception.errno, errno.EIO)
            self.assertEqual(m.stats()["remote"]["requests"], requests, "files whose tree changed were asked for again")
        self.assertEqual(m.log().count("the tree was packed again since it was mounted"), 1, m.log())
        with mt.Mount(url, f"disk_cache={cache},remote_timeout=10") as m:
            for name in os.listdir(v2):
                self.assertEqual(mt.sha256_read(m / name), mt.sha256_read(v2 / name), name)

    def test_unpack_and_verify_of_a_tree_packed_again_meanwhile_fail(self):
        # They read the tree an object at a time, in the manifest's order.
        # The first object's answer (unpack: config.json; verify, which
        # reads only stores without --against: the first shard, one GET of
        # a block) is held back while the other version is packed over the
        # tree, so the shards that follow are the new tree's: a mix, which
        # unpack wrote out and verify passed, exit 0, before the manifest
        # was asked for again after the last object.
        v1, v2 = self.two_versions()
        url = "s3://models/read-meanwhile"
        out = self.fresh("out") / "unpacked"
        with rt.Proxy(self.cluster.endpoint) as proxy:
            for command, first, old, new in ((["unpack", url, out], "config.json", v1, v2),
                                             (["verify", url], "model-00001", v2, v1)):
                subprocess.run([TOOL, "pack", "-q", old, url], check=True)
                proxy.fault("delay_after", "GET", first, seconds=6)
                p = subprocess.Popen([TOOL, *command, "--s3-endpoint", proxy.url, "--remote-timeout", "30"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                try:
                    self.assertTrue(proxy.faulted.wait(60), f"{first} was never read")
                    subprocess.run([TOOL, "pack", "-q", new, url], check=True)
                finally:
                    stdout, stderr = p.communicate(timeout=120)
                self.assertEqual(p.returncode, 1, stdout + stderr)
                self.assertIn("the tree was packed again while it was read", stdout + stderr)
                self.assertIn("run again", stdout + stderr)
                self.assertFalse(out.exists(), "unpack left a tree that may mix two")

    def test_a_relative_disk_cache_holds_blocks_after_the_daemon_detaches(self):
        src = self.fresh("src")
        write_checkpoint(src / "m.safetensors", 3, 5)
        url = "s3://models/relative"
        subprocess.run([TOOL, "pack", "-q", src, url], check=True)
        cwd, mountpoint = self.fresh("cwd"), self.mountpoint()
        # Not there yet, so realpath(3) cannot resolve it; detached (no -f),
        # so the daemon's working directory is / by the time it reads.
        p = subprocess.run([mt.executable("PTWMFS"), url, mountpoint, "-o", "disk_cache=cache,remote_timeout=10"],
                           cwd=cwd, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        try:
            self.assertEqual(mt.sha256_read(mountpoint / "m.safetensors"), mt.sha256_read(src / "m.safetensors"))
            entries = sum(f.stat().st_size for f in (cwd / "cache").iterdir())
            self.assertGreater(entries, (3 << 20) // 2, "the blocks read are not in the disk cache")
        finally:
            if mounted(str(mountpoint)):
                unmount(str(mountpoint), lazy=False)
            os.rmdir(mountpoint)

    def test_pack_refuses_a_file_named_as_the_manifest(self):
        src = self.fresh("src")
        (src / "ptwmfs-manifest.json").write_text('{"mine": true}\n')
        write_checkpoint(src / "m.safetensors", 1, 6)
        for dst in ("s3://models/named", str(self.fresh("out") / "packed")):
            p = subprocess.run([TOOL, "pack", "-q", src, dst], capture_output=True, text=True)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("ptwmfs-manifest.json", p.stderr)
            self.assertIn("rename it", p.stderr)

    def test_a_missing_bucket_is_said_as_such(self):
        mountpoint = self.mountpoint()
        p = subprocess.run([mt.executable("PTWMFS"), "s3://no-such-bucket/x", mountpoint, "-f", "-o",
                            f"disk_cache={self.fresh('cache')},remote_timeout=5"],
                           capture_output=True, text=True, timeout=120)
        os.rmdir(mountpoint)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("no such bucket", p.stderr)
        p = subprocess.run([TOOL, "unpack", "s3://no-such-bucket/x", self.fresh("out") / "x"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("no such bucket", p.stderr)

    def test_disk_cache_bytes_follow_the_damaged_entries_dropped(self):
        src = self.fresh("src")
        write_checkpoint(src / "m.safetensors", 6, 7)
        url = "s3://models/damaged"
        subprocess.run([TOOL, "pack", "-q", src, url], check=True)
        cache = self.fresh("cache")
        with mt.Mount(url, f"disk_cache={cache},remote_timeout=10") as m:
            mt.sha256_read(m / "m.safetensors")
        for entry in cache.iterdir():
            os.truncate(entry, entry.stat().st_size // 2)
        with mt.Mount(url, f"disk_cache={cache},remote_timeout=10") as m:
            self.assertEqual(mt.sha256_read(m / "m.safetensors"), mt.sha256_read(src / "m.safetensors"))
            remote = m.stats()["remote"]
            held = sum(f.stat().st_size for f in cache.iterdir() if f.suffix == ".entry")
            self.assertGreater(remote["disk_cache_rejected"], 0)
            self.assertEqual(remote["disk_cache_bytes"], held, remote)

    def test_an_interrupted_repack_says_the_prefix_holds_no_tree(self):
        src = self.fresh("src")
        write_checkpoint(src / "m.safetensors", 2, 8)
        (src / "big.bin").write_bytes(os.urandom(8 << 20))
        url = "s3://models/interrupted"
        subprocess.run([TOOL, "pack", "-q", src, url], check=True)
        with rt.Proxy(self.cluster.endpoint) as proxy:
            proxy.fault("delay_after", "PUT", "big.bin", count=10, seconds=5)
            p = subprocess.Popen([TOOL, "pack", "-q", src, url, "--s3-endpoint", proxy.url], stderr=subprocess.PIPE,
                                 text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
            self.assertTrue(proxy.faulted.wait(60), "the upload never reached big.bin")
            p.send_signal(signal.SIGINT)
            _, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 130, err)
        self.assertIn("holds no tree now", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
