"""The daemon's resident memory stays under cache_size + 64 MiB while it
serves files several times larger than its cache (under a sanitizer: grows
by less than that from its resident size once mounted), whether its chunks
are a few hundred bytes each or 16 MiB."""
import os
import random
import threading
import unittest

import numpy as np

from ptwmfs_testlib import (Mount, TempDir, make_model, make_packed_model, pack, regular_files, sha256_mmap,
                            sha256_read)

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
    def assert_peak_within_bound(self, mount, at_start):
        peak = status_bytes(mount.process.pid, "VmHWM")
        if sanitized(mount.process.pid):
            # Under a sanitizer only the growth is the daemon's own.
            self.assertLess(peak - at_start, CACHE + ALLOWANCE,
                            f"resident grew by {(peak - at_start) >> 20} MiB (sanitizer build)")
        else:
            self.assertLess(peak, CACHE + ALLOWANCE, f"peak resident {peak >> 20} MiB")

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
                self.assert_peak_within_bound(mount, at_start)

    def test_small_chunks_count_at_their_resident_size(self):
        """50,000 tensors of 128 bytes, one chunk each, as FP4 checkpoints'
        scales and small tensors are: each takes a whole page and a cache
        entry resident, 35 times its length. Counted at their length, the
        4 MiB cache held over 100 MiB of them: the daemon peaked at 149 MiB."""
        with TempDir() as tmp:
            original, store = os.path.join(tmp, "model"), os.path.join(tmp, "store")
            os.makedirs(original)
            rng = np.random.default_rng(5)
            values = make_model.bf16_from_f32(rng.normal(0.0, 0.02, size=(50000, 64)).astype(np.float32))
            make_model.write_safetensors(os.path.join(original, "model.safetensors"),
                                         [(f"layers.{i // 8}.t{i % 8}", "BF16", (64,), values[i])
                                          for i in range(len(values))])
            pack(original, store)
            with Mount(store, f"cache_size={CACHE}") as mount:
                if sanitized(mount.process.pid):
                    # ASan's quarantine (256 MiB) holds the entries and
                    # buffers of the chunks evicted: resident grew by 129
                    # MiB in a CI run, none of it the cache's.
                    self.skipTest("the sanitizer's allocator keeps freed memory")
                at_start = status_bytes(mount.process.pid, "VmRSS")
                with open(mount / "model.safetensors", "rb") as f:
                    fd = f.fileno()
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
                    size = os.fstat(fd).st_size
                    # Every block once, alternating between the file's
                    # halves: each read lands past the reorder slack (4 MiB)
                    # of the last, so no run is sequential and nothing is
                    # released behind a reader: the cache fills and evicts.
                    block, half = 32 << 10, (size // 2 + (32 << 10) - 1) // (32 << 10) * (32 << 10)
                    for offset in range(0, half, block):
                        for start in (offset, half + offset):
                            if start < size:
                                os.pread(fd, block, start)
                cache = mount.stats()["cache"]
                self.assertGreater(cache["evictions"], 0)
                self.assertLessEqual(cache["cached_bytes"], cache["capacity_bytes"])
                self.assert_peak_within_bound(mount, at_start)

    def test_decode_buffers_of_large_chunks_are_not_kept(self):
        """Stores packed in 16 MiB chunks, read by four readers at once:
        each thread that decodes reuses buffers as large as the chunks
        (the stored bytes, the planes), some 2.3 times the chunk. Kept from
        chunk to chunk by the FUSE threads and decode-ahead workers, they
        left the daemon at 124-147 MiB resident after the reads."""
        with TempDir() as tmp:
            original, store = os.path.join(tmp, "model"), os.path.join(tmp, "store")
            make_model.make_model(original, seed=32, scale=32)
            pack(original, store, "--chunk-size", "16M")
            want = sha256_read(os.path.join(original, "model.safetensors"))
            with Mount(store, f"cache_size={CACHE}") as mount:
                if sanitized(mount.process.pid):
                    # Their allocators hold what is freed (ASan's quarantine:
                    # 256 MiB), so the release cannot show.
                    self.skipTest("the sanitizer's allocator keeps freed memory")
                got = []
                readers = [threading.Thread(target=lambda: got.append(sha256_read(mount / "model.safetensors")))
                           for _ in range(4)]
                for reader in readers:
                    reader.start()
                for reader in readers:
                    reader.join()
                self.assertEqual(got, [want] * 4)
                # Resident once the reads are done: their peak also holds
                # the chunks being read, up to 16 MiB a reader.
                resident = status_bytes(mount.process.pid, "VmRSS")
                self.assertLess(resident, CACHE + ALLOWANCE, f"resident {resident >> 20} MiB")


if __name__ == "__main__":
    unittest.main()
