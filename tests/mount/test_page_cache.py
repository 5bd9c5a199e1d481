"""What reading through the mount leaves in the kernel's page cache of the
compressed stores (-o page_cache): with drop (the default) and direct, the
store's pages do not stay once decoded, so a model served through the mount
is cached once, as the files it shows; with keep they do. Every policy
returns the original bytes, read sequentially, through mmap and at random
offsets, and -o kernel_readahead sets the mount's read-ahead window."""
import os
import random
import subprocess
import time
import unittest

from mount_guard import run_not_mounting
from ptwmfs_testlib import Mount, TempDir, make_packed_model, pack, regular_files, sha256_mmap, sha256_read
import make_layouts  # noqa: E402  (tests/data, on the path ptwmfs_testlib sets)

TMPFS_MAGIC = 0x01021994


def resident_bytes(path):
    """Bytes of `path` in the page cache (util-linux fincore)."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                         check=True, capture_output=True, text=True).stdout
    return int(out.split()[0])


def evict(path):
    with open(path, "rb") as f:
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def on_tmpfs(path):
    # os.statvfs has no f_type; /proc/self/mountinfo names the file system.
    path, best = os.path.realpath(path), ("", "")
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point, fs_type = fields[4], fields[fields.index("-") + 1]
            if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) >= len(best[0]):
                best = (point, fs_type)
    return best[1] == "tmpfs"


class OnDiskTestCase(unittest.TestCase):
    """A temporary directory self.dir, removed after the test; skips where
    it is on tmpfs, whose pages cannot be dropped."""

    def setUp(self):
        tmp = TempDir()
        self.dir = tmp.__enter__()
        self.addCleanup(tmp.__exit__, None, None, None)
        if on_tmpfs(self.dir):
            self.skipTest("the temporary directory is on tmpfs, whose pages cannot be dropped")


class PageCachePolicy(OnDiskTestCase):
    def setUp(self):
        super().setUp()
        self.original, self.store = make_packed_model(self.dir, scale=32)
        self.files = regular_files(self.original)
        self.stores = [os.path.join(self.store, f + ".ptwm") for f in self.files if f.endswith(".safetensors")]
        self.assertTrue(self.stores)

    def read_everything(self, mount):
        for rel in self.files:
            want = sha256_read(os.path.join(self.original, rel))
            self.assertEqual(sha256_read(mount / rel), want, rel)
            self.assertEqual(sha256_mmap(mount / rel), want, rel)
        rng = random.Random(5)
        for rel in self.files:
            with open(os.path.join(self.original, rel), "rb") as f:
                original = f.read()
            with open(mount / rel, "rb") as f:
                for _ in range(50):
                    offset, length = rng.randrange(len(original) + 1), rng.randrange(1, 300000)
                    self.assertEqual(os.pread(f.fileno(), length, offset), original[offset:offset + length], rel)

    def store_residency(self, policy, settle=None):
        """Store bytes cached right after reading everything, their total
        size, and, when `settle` holds, the bytes cached once settle(bytes)
        is true or 10 s have passed (polled while still mounted)."""
        for path in self.stores:
            evict(path)
        with Mount(self.store, f"page_cache={policy},cache_size=4M") as mount:
            self.read_everything(mount)
            resident = sum(resident_bytes(p) for p in self.stores)
            size = sum(os.path.getsize(p) for p in self.stores)
            settled = resident
            deadline = time.monotonic() + 10
            while settle is not None and not settle(settled) and time.monotonic() < deadline:
                time.sleep(0.1)
                settled = sum(resident_bytes(p) for p in self.stores)
        return resident, size, settled

    def test_drop_leaves_no_store_pages(self):
        little = len(self.stores) * (64 << 10)
        resident, size, settled = self.store_residency("drop", settle=lambda cached: cached < little)
        # While reading: the span being read of each store (a sixteenth of it,
        # 4 MiB at least), with the kernel's read-ahead and folios around it.
        self.assertLess(resident, size // 2, f"{resident} of {size} store bytes cached after reading")
        # A store idle for a second has its pages dropped.
        self.assertLess(settled, little, f"{settled} of {size} store bytes still cached 10 s after reading")

    def test_direct_leaves_no_store_pages(self):
        resident, size, _ = self.store_residency("direct")
        self.assertLess(resident, len(self.stores) * (64 << 10), f"{resident} of {size} store bytes cached")

    def test_keep_leaves_store_pages(self):
        resident, size, _ = self.store_residency("keep")
        self.assertGreater(resident, size // 2, "keep should leave the store's pages cached")

    def test_bad_policy_is_refused(self):
        mountpoint = os.path.join(self.dir, "mnt")
        os.mkdir(mountpoint)
        # (Accepted, it would mount and detach: run_not_mounting unmounts it,
        # else the temporary directory's removal fails on it and it stays.)
        result, mounted = run_not_mounting([os.environ["PTWMFS"], self.store, mountpoint, "-o", "page_cache=sometimes"],
                                           mountpoint)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("bad page_cache 'sometimes'", result.stderr)
        self.assertFalse(mounted)

    def read_ahead_kb(self, options):
        with Mount(self.store, options) as mount:
            os.stat(mount / self.files[0])  # the first request after INIT applies it
            device = os.stat(mount.path).st_dev
            with open(f"/sys/class/bdi/{os.major(device)}:{os.minor(device)}/read_ahead_kb") as f:
                window = int(f.read())
            self.assertEqual(sha256_read(mount / self.files[0]),
                             sha256_read(os.path.join(self.original, self.files[0])))
        return window

    def test_kernel_readahead_sets_the_window(self):
        if os.geteuid() != 0:
            self.skipTest("setting a mount's read-ahead needs root")
        self.assertEqual(self.read_ahead_kb("kernel_readahead=4M"), 4096)

    def test_kernel_readahead_is_1M_by_default_and_0_leaves_the_kernels(self):
        if os.geteuid() != 0:
            self.skipTest("setting a mount's read-ahead needs root")
        self.assertEqual(self.read_ahead_kb(""), 1024)
        self.assertEqual(self.read_ahead_kb("kernel_readahead=0"), 128)


def disk_bytes_read(pid):
    """Bytes the process (all its threads) had fetched from storage."""
    with open(f"/proc/{pid}/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("read_bytes:"))


class DropFetchesEachStoreByteOnce(OnDiskTestCase):
    """With page_cache=drop, a cold sequential read through the mount
    fetches the store from disk once, as with keep: what goes from the page
    cache is what was read, never what the kernel read ahead and the daemon
    is still to read. An MXFP4 tensor's values chunk first reads its
    scales chunk, which lies after all the tensor's values; dropping
    everything up to the furthest read threw the read-ahead values in
    between away (1.19 times the store fetched, with an 8 MiB read-ahead)."""

    def setUp(self):
        if not os.path.exists(f"/proc/{os.getpid()}/io"):
            self.skipTest("no /proc/PID/io (the kernel counts no I/O per process)")
        super().setUp()
        g = make_layouts.Gen(7)
        tensors = []
        for layer in range(6):  # 6 x 4 MiB of blocks, each with 256 KiB of scales after them
            tensors += make_layouts.mx(g, f"model.layers.{layer}.mlp.experts.gate_up_proj", [2880], 90)
        os.mkdir(os.path.join(self.dir, "model"))
        self.original = os.path.join(self.dir, "model", "model.safetensors")
        with open(self.original, "wb") as f:
            f.write(make_layouts.safetensors_bytes(tensors))
        self.store_dir = os.path.join(self.dir, "store")
        pack(os.path.join(self.dir, "model"), self.store_dir)
        self.store = os.path.join(self.store_dir, "model.safetensors.ptwm")

    def fetched(self, policy):
        """Store bytes fetched from disk by a cold sequential read of the file."""
        evict(self.store)
        with Mount(self.store_dir, f"page_cache={policy}") as mount:
            before = disk_bytes_read(mount.process.pid)
            self.assertEqual(sha256_read(mount / "model.safetensors"), sha256_read(self.original))
            return disk_bytes_read(mount.process.pid) - before

    def test_drop_fetches_no_more_than_keep(self):
        size = os.path.getsize(self.store)
        keep, drop = self.fetched("keep"), self.fetched("drop")
        self.assertGreater(keep, size // 2, "the cold read fetched too little to tell: was the store cached?")
        self.assertLessEqual(drop, keep * 1.02 + (256 << 10),
                             f"page_cache=drop fetched {drop} bytes of a {size}-byte store, keep {keep}")


if __name__ == "__main__":
    unittest.main()
