"""Several processes (and threads) reading random ranges of the mount at
once all get exact bytes, with a cache small enough to evict constantly."""
import mmap
import multiprocessing
import multiprocessing.connection
import os
import random
import signal
import threading
import time
import unittest

from ptwmfs_testlib import Mount, TempDir, make_packed_model, regular_files

READS_PER_WORKER = 300
# For all readers to finish (about a second in a release build, far more under
# a sanitizer); meson's own timeout is 900 s.
READERS_SECONDS = 600


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


def reader_process(conn, *args):
    conn.send(random_reads(*args))
    conn.close()


def exit_description(code):
    return f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit status {code}"


class ConcurrentReaders(unittest.TestCase):
    def test_processes_and_threads_read_exact_bytes(self):
        with TempDir() as tmp:
            original, store = make_packed_model(tmp, scale=8)
            files = regular_files(original)
            with Mount(store, "cache_size=1M,workers=2,readahead=512K") as mount:
                # Forked processes, each with a pipe of its own for its
                # result, not a multiprocessing.Pool: a pool worker that died
                # (SIGBUS from an mmap whose page the daemon failed) lost its
                # job without a word, and the test waited out its timeout; one
                # that died holding the pool's shared queue lock would have
                # blocked the others.
                context = multiprocessing.get_context("fork")
                processes, pending = [], {}
                for seed in range(4):
                    receive, send = context.Pipe(duplex=False)
                    process = context.Process(target=reader_process, daemon=True,
                                              args=(send, mount.path, original, files, seed, seed % 2 == 1))
                    process.start()
                    send.close()
                    processes.append(process)
                    pending[receive] = seed
                # Threads of this process read at the same time as the processes.
                thread_results = []

                def thread_reads(seed):
                    try:
                        thread_results.append(random_reads(mount.path, original, files, seed, False))
                    except Exception as e:  # reported below, not lost in the thread
                        thread_results.append([f"thread {seed}: {e!r}"])
                threads = [threading.Thread(target=thread_reads, args=(100 + s,), daemon=True) for s in range(3)]
                for t in threads:
                    t.start()
                deadline = time.monotonic() + READERS_SECONDS
                results = {}
                while pending and time.monotonic() < deadline:
                    for receive in multiprocessing.connection.wait(list(pending), deadline - time.monotonic()):
                        seed = pending.pop(receive)
                        try:
                            results[seed] = receive.recv()
                        except EOFError:  # died before sending
                            results[seed] = None
                        receive.close()
                for t in threads:
                    t.join(max(0.0, deadline - time.monotonic()))
                for process in processes:
                    process.join(max(1.0, deadline - time.monotonic()))
                    if process.is_alive():
                        process.kill()
                        process.join(10)
                for receive in pending:
                    receive.close()
                exits = [exit_description(p.exitcode) for p in processes]
                self.assertEqual(sorted(pending.values()), [], f"readers still reading after {READERS_SECONDS} s "
                                                               f"(killed): {exits}")
                self.assertEqual([t.name for t in threads if t.is_alive()], [],
                                 f"reader threads still reading after {READERS_SECONDS} s")
                self.assertEqual([p.exitcode for p in processes], [0] * len(processes), f"reader processes: {exits}")
                self.assertEqual(sorted(results), list(range(len(processes))), results)
                for wrong in list(results.values()) + thread_results:
                    self.assertEqual(wrong, [])
                cache = mount.stats()["cache"]
                self.assertGreater(cache["evictions"], 0, "the cache should have been too small to keep everything")
                self.assertLessEqual(cache["cached_bytes"], cache["capacity_bytes"])


if __name__ == "__main__":
    unittest.main()
