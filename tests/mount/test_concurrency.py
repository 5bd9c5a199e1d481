"""Several processes (and threads) reading random ranges of the mount at
once all get exact bytes, with a cache small enough to evict constantly."""
import mmap
import multiprocessing
import os
import random
import threading
import unittest

from ptwmfs_testlib import Mount, TempDir, make_packed_model, regular_files

READS_PER_WORKER = 300


def random_reads(mount_path, original_path, files, seed, use_mmap):
    """Returns a list of mismatch descriptions (empty: all exact)."""
    rng = random.Random(seed)
    wrong = []
    for _ in range(READS_PER_WORKER):
        rel = rng.choice(files)
        size = os.path.getsize(os.path.join(original_path, rel))
        if size == 0:
            continue
        offset = rng.randrange(size)
        length = rng.choice([1, 100, 4096, 65536, 300000, 1 << 20])
        with open(os.path.join(original_path, rel), "rb") as f:
            want = os.pread(f.fileno(), length, offset)
        with open(os.path.join(mount_path, rel), "rb") as f:
            if use_mmap:
                with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
                    got = m[offset:offset + length]
            else:
                got = os.pread(f.fileno(), length, offset)
        if got != want:
            wrong.append(f"{rel} [{offset}, +{length}) differs")
    return wrong


class ConcurrentReaders(unittest.TestCase):
    def test_processes_and_threads_read_exact_bytes(self):
        with TempDir() as tmp:
            original, store = make_packed_model(tmp, scale=8)
            files = regular_files(original)
            with Mount(store, "cache_size=1M,workers=2,readahead=512K") as mount:
                context = multiprocessing.get_context("fork")
                with context.Pool(4) as pool:
                    jobs = [pool.apply_async(random_reads, (mount.path, original, files, seed, seed % 2 == 1))
                            for seed in range(4)]
                    # Threads of this process read at the same time as the pool.
                    thread_results = []
                    threads = [threading.Thread(target=lambda s=s: thread_results.append(
                        random_reads(mount.path, original, files, 100 + s, False))) for s in range(3)]
                    for t in threads:
                        t.start()
                    results = [job.get(timeout=600) for job in jobs]
                    for t in threads:
                        t.join()
                for wrong in results + thread_results:
                    self.assertEqual(wrong, [])
                cache = mount.stats()["cache"]
                self.assertGreater(cache["evictions"], 0, "the cache should have been too small to keep everything")
                self.assertLessEqual(cache["cached_bytes"], cache["capacity_bytes"])


if __name__ == "__main__":
    unittest.main()
