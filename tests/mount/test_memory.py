"""The daemon's resident memory stays under cache_size + 64 MiB while it
serves files several times larger than its cache."""
import os
import random
import unittest

from ptwmfs_testlib import Mount, TempDir, make_packed_model, regular_files, sha256_mmap, sha256_read

CACHE = 4 << 20
ALLOWANCE = 64 << 20


def peak_resident_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/PID/status")


class BoundedMemory(unittest.TestCase):
    def test_peak_rss_below_cache_plus_allowance(self):
        with TempDir() as tmp:
            original, store = make_packed_model(tmp, scale=16)
            largest = max(os.path.getsize(os.path.join(original, f)) for f in regular_files(original))
            self.assertGreater(largest, 4 * CACHE)
            with Mount(store, f"cache_size={CACHE}") as mount:
                for rel in regular_files(original):
                    want = sha256_read(os.path.join(original, rel))
                    self.assertEqual(sha256_read(mount / rel), want)
                    self.assertEqual(sha256_mmap(mount / rel), want)
                rng = random.Random(3)
                with open(mount / "model.safetensors", "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    for _ in range(300):
                        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                        os.pread(f.fileno(), 1 << 20, rng.randrange(size))
                cache = mount.stats()["cache"]
                self.assertGreater(cache["evictions"], 0)
                peak = peak_resident_bytes(mount.process.pid)
                self.assertLess(peak, CACHE + ALLOWANCE, f"peak resident {peak >> 20} MiB")


if __name__ == "__main__":
    unittest.main()
