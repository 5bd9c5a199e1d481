"""Every store keeps its file open while mounted: the daemon raises its
soft limit on open files to the hard one, and when the stores still need
more descriptors than that it says so, with the numbers, before mounting
(past the limit the scan took stores for damaged files and libfuse then
failed with 'failed to open /dev/fuse: Too many open files')."""
import json
import os
import re
import resource
import struct
import unittest

from mount_guard import run_not_mounting
from ptwmfs_testlib import Mount, TempDir, executable, pack

STORES = 100


def tiny_safetensors(path, values):
    """A safetensors file of one F32 tensor: 8-byte little-endian header
    length, the JSON header padded to 8 bytes, the data."""
    data = struct.pack(f"<{len(values)}f", *values)
    header = json.dumps({"w": {"dtype": "F32", "shape": [len(values)], "data_offsets": [0, len(data)]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)


def open_file_limit(soft, hard):
    """A preexec_fn setting RLIMIT_NOFILE in the child."""
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class ManyStores(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = cls.enterClassContext(TempDir())
        cls.original = os.path.join(cls.tmp, "model")
        os.mkdir(cls.original)
        for i in range(STORES):
            tiny_safetensors(os.path.join(cls.original, f"shard-{i:03}.safetensors"), [float(i), 1.5, -2.0, 0.25])
        cls.store = os.path.join(cls.tmp, "store")
        pack(cls.original, cls.store)
        cls.mountpoint = os.path.join(cls.tmp, "mnt")
        os.mkdir(cls.mountpoint)

    def test_more_stores_than_the_hard_limit_allows(self):
        result, mounted = run_not_mounting([executable("PTWMFS"), self.store, self.mountpoint], self.mountpoint,
                                           preexec_fn=open_file_limit(64, 64))
        self.assertFalse(mounted)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertRegex(result.stderr, rf"{self.store}: its {STORES} stores need 1[0-9][0-9] open file descriptors "
                                        r"\(the stores' and 32 for the mount itself\), more than the limit of 64; "
                                        r"raise it where ptwmfs is started, e.g. 'ulimit -n 1[0-9][0-9]'")
        # Refused as a whole, not store by store.
        self.assertNotIn("not a usable store", result.stderr)
        self.assertNotIn("/dev/fuse", result.stderr)

    def refused(self, source, options, limit):
        """ptwmfs SOURCE on the class's mount point with -o options, under
        an open-file limit of `limit`: its stderr, once refused."""
        result, mounted = run_not_mounting([executable("PTWMFS"), source, self.mountpoint, "-o", options],
                                           self.mountpoint, preexec_fn=open_file_limit(limit, limit))
        self.assertFalse(mounted)
        self.assertEqual(result.returncode, 1, result.stderr)
        return result.stderr

    def test_clone_fd_threads_are_counted(self):
        # With -o clone_fd every FUSE thread opens /dev/fuse again: 100
        # threads' were not counted, the mount came up, and the threads
        # past the limit carried on without (or failed to start).
        limit = 200
        with Mount(self.store, preexec_fn=open_file_limit(limit, limit)):
            pass  # the stores alone fit
        stderr = self.refused(self.store, "clone_fd,max_threads=100", limit)
        needed = re.search(rf"{self.store}: its {STORES} stores need (\d+) open file descriptors "
                           r"\(the stores', 100 for -o clone_fd's FUSE threads and 32 for the mount itself\), "
                           rf"more than the limit of {limit}; raise it where ptwmfs is started, "
                           r"e.g. 'ulimit -n (\d+)'", stderr)
        self.assertIsNotNone(needed, stderr)
        # The stores' (100, the directory, the standard streams) and the rest.
        self.assertEqual(needed[1], needed[2])
        self.assertGreaterEqual(int(needed[1]), STORES + 1 + 3 + 100 + 32)
        self.assertLessEqual(int(needed[1]), STORES + 1 + 3 + 100 + 32 + 8)

    def test_page_cache_direct_is_counted_with_clone_fd(self):
        # Both counted: 100 stores opened twice, 10 threads' /dev/fuse.
        stderr = self.refused(self.store, "page_cache=direct,clone_fd", 240)
        self.assertRegex(stderr, rf"{self.store}: its {STORES} stores need 2[4-9][0-9] open file descriptors "
                                 r"\(the stores', 10 for -o clone_fd's FUSE threads and 32 for the mount itself\), "
                                 r"more than the limit of 240")

    def test_remote_requests_are_counted(self):
        # Each thread making requests keeps a connection and opens a
        # disk-cache file: fetch_connections=100 was taken under a limit of
        # 128, and the requests failed once mounted. Refused before the
        # first request, with the numbers: no server needed.
        stderr = self.refused("s3://bucket/prefix", "fetch_connections=100,workers=4,remote_timeout=1", 128)
        needed = re.search(r"s3://bucket/prefix: the mount needs (\d+) open file descriptors \((\d+) open already; "
                           r"228, two each \(a connection and a disk-cache file\), for 100 background fetch threads, "
                           r"10 FUSE threads and 4 decode-ahead workers; and 32 for the mount itself\), "
                           r"more than the limit of 128; raise it where ptwmfs is started, e.g. 'ulimit -n (\d+)'",
                           stderr)
        self.assertIsNotNone(needed, stderr)
        self.assertEqual(int(needed[1]), int(needed[2]) + 228 + 32)
        self.assertEqual(needed[1], needed[3])
        self.assertNotIn("ptwmfs-manifest.json", stderr)
        # clone_fd's threads counted too; no decode-ahead workers with workers=0.
        stderr = self.refused("s3://bucket/prefix", "clone_fd,max_threads=40,workers=0,remote_timeout=1", 128)
        self.assertIn("96, two each (a connection and a disk-cache file), for 8 background fetch threads and 40 FUSE threads; "
                      "40 for -o clone_fd's FUSE threads; and 32 for the mount itself", stderr)

    def test_low_soft_limit_is_raised_to_the_hard_limit(self):
        # A hard limit above ours can only be lowered (raising it needs root).
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        hard = 4096 if hard == resource.RLIM_INFINITY else min(4096, hard)
        if hard < STORES + 64:
            self.skipTest(f"the hard open-file limit here ({hard}) is too low for {STORES} stores")
        with Mount(self.store, preexec_fn=open_file_limit(64, hard)) as mount:
            names = sorted(os.listdir(mount.path))
            self.assertEqual(names, sorted(os.listdir(self.original)))
            for name in names:
                with open(mount / name, "rb") as shown, open(os.path.join(self.original, name), "rb") as packed:
                    self.assertEqual(shown.read(), packed.read(), name)
            with open(f"/proc/{mount.process.pid}/limits") as f:
                line = next(line for line in f if line.startswith("Max open files"))
            self.assertEqual(line.split()[3:5], [str(hard), str(hard)], line)


if __name__ == "__main__":
    unittest.main()
