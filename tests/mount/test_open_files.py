"""Every store keeps its file open while mounted: the daemon raises its
soft limit on open files to the hard one, and when the stores still need
more descriptors than that it says so, with the numbers, before mounting
(past the limit the scan took stores for damaged files and libfuse then
failed with 'failed to open /dev/fuse: Too many open files')."""
import json
import os
import resource
import struct
import subprocess
import unittest

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
        result = subprocess.run([executable("PTWMFS"), self.store, self.mountpoint],
                                preexec_fn=open_file_limit(64, 64), capture_output=True, text=True, timeout=60)
        mounted = os.path.ismount(self.mountpoint)
        if mounted:  # accepted after all (and detached): leave no mount behind
            subprocess.run(["fusermount3", "-u", self.mountpoint], check=False)
        self.assertFalse(mounted)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertRegex(result.stderr, rf"{self.store}: its {STORES} stores need 1[0-9][0-9] open file descriptors "
                                        r"\(the stores' and 32 for the mount itself\), more than the limit of 64; "
                                        r"raise it where ptwmfs is started, e.g. 'ulimit -n 1[0-9][0-9]'")
        # Refused as a whole, not store by store.
        self.assertNotIn("not a usable store", result.stderr)
        self.assertNotIn("/dev/fuse", result.stderr)

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
