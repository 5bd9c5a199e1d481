"""The daemon's resident memory stays under cache_size + 64 MiB while it
serves files several times larger than its cache (under a sanitizer: grows
by less than that from its resident size once mounted)."""
import os
import random
import unittest

from ptwmfs_testlib import Mount, TempDir, make_packed_model, regular_files, sha256_mmap, sha256_read

CACHE = 4 << 20
ALLOWANCE = 64 << 20


def status_bytes(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/PID/status")


def sanitized(pid):
    """Whether the daemon runs under ASan or TSan: their shadow memory and
    allocators add tens of MiB at start (about 63 MiB resident for ASan),
    which says nothing about what serving files costs."""
    with open(f"/proc/{pid}/maps") as f:
        return any("libasan" in line or "libtsan" in line for line in f)


class BoundedMemory(unittest.TestCase):
    def test_peak_rss_below_cache_plus_allowance(self):
        with TempDir() as tmp:
            original, store = make_packed_model(tmp, scale=16)
            largest = max(os.path.getsize(os.path.join(original, f)) for f in regular_files(original))
            self.assertGreater(largest, 4 * CACHE)
            with Mount(store, f"cache_size={CACHE}") as mount:
                at_start = status_bytes(mount.process.pid, "VmRSS")
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
                peak = status_bytes(mount.process.pid, "VmHWM")
                if sanitized(mount.process.pid):
                    # Under a sanitizer only the growth is the daemon's own.
                    self.assertLess(peak - at_start, CACHE + ALLOWANCE,
                                    f"resident grew by {(peak - at_start) >> 20} MiB (sanitizer build)")
                else:
                    self.assertLess(peak, CACHE + ALLOWANCE, f"peak resident {peak >> 20} MiB")


if __name__ == "__main__":
    unittest.main()
