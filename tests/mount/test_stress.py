"""Stress: many processes and threads read a model directory several times
larger than a 1 MiB cache for a bounded time (random pread ranges that
straddle the header, tensor and chunk boundaries and EOF, and mmaps of
whole tensors), every byte checked against the originals, while the
daemon's resident memory is sampled. Then the file system is taken away
under a fresh batch of readers (unmount, and SIGTERM to the daemon): the
daemon exits by itself with status 0, readers get errors or finish, nothing
hangs and no mount is left behind.

PTWMFS_STRESS_SECONDS sets the length of the load (20 by default).
"""
import errno
import mmap
import multiprocessing
import os
import random
import signal
import subprocess
import threading
import time
import unittest

import numpy as np

import mount_guard
from ptwmfs_testlib import (PAGE, Mount, TempDir, make_model, pack, regular_files, safetensors_tensors,
                            store_chunks)

CACHE = 1 << 20
ALLOWANCE = 64 << 20  # as test_memory.py: the daemon stays under cache_size + 64 MiB
SECONDS = float(os.environ.get("PTWMFS_STRESS_SECONDS", "20"))
PROCESSES = 6
THREADS = 2
MAX_READ = 3 << 20
MMAP_SHARE = 0.35  # of the operations; the rest are preads
# What a reader may see once the file system is gone; anything else is a failure.
GONE_ERRNOS = {errno.ENOTCONN, errno.EIO, errno.ENXIO, errno.ENODEV, errno.ENOENT, errno.ESHUTDOWN,
               errno.ECONNABORTED, errno.EBADF, errno.EINTR}
COUNTERS = ("reads", "bytes", "mismatches", "short", "errors", "gone_errors") + tuple(
    errno.errorcode[e] for e in sorted(GONE_ERRNOS))


def make_shards(directory, seed):
    """Three shards of odd-sized tensors (boundaries off any alignment),
    compressible and incompressible, in the layout of a sharded checkpoint."""
    rng = np.random.default_rng(seed)
    os.makedirs(directory, exist_ok=True)
    for shard in range(3):
        tensors = []
        for i in range(4):
            rows, cols = int(rng.integers(300, 900)), int(rng.integers(61, 700))
            values = rng.normal(0.0, 0.02, size=(rows, cols)).astype(np.float32)
            tensors.append((f"s{shard}.t{i}.weight", "BF16", (rows, cols), make_model.bf16_from_f32(values)))
            tensors.append((f"s{shard}.t{i}.scale", "F16", (rows,), values[:, 0].astype(np.float16)))
        odd = int(rng.integers(100_000, 400_000))
        tensors.append((f"s{shard}.noise", "U8", (odd,), rng.integers(0, 256, size=odd, dtype=np.uint8)))
        tensors.append((f"s{shard}.one", "U8", (1,), np.array([shard], dtype=np.uint8)))
        make_model.write_safetensors(os.path.join(directory, f"model-{shard + 1:05d}-of-00003.safetensors"),
                                     tensors, {"format": "pt", "shard": str(shard)})


class Corpus:
    """The original files in memory, their tensors and the offsets worth
    straddling (header end, tensor and chunk boundaries, EOF)."""

    def __init__(self, original, store):
        self.files = regular_files(original)
        self.data = {}
        self.tensors = {}
        self.boundaries = {}
        for rel in self.files:
            with open(os.path.join(original, rel), "rb") as f:
                self.data[rel] = f.read()
            size = len(self.data[rel])
            edges = {0, size}
            if rel.endswith(".safetensors"):
                tensors = safetensors_tensors(os.path.join(original, rel))
                self.tensors[rel] = sorted((begin, end) for _, _, begin, end in tensors.values())
                edges |= {8, min(self.tensors[rel])[0]}
                for begin, end in self.tensors[rel]:
                    edges |= {begin, end}
                for chunk in store_chunks(os.path.join(store, rel + ".ptwm")):
                    edges |= {chunk["original_offset"], chunk["original_offset"] + chunk["original_length"]}
            self.boundaries[rel] = sorted(edges)
        self.weights = [max(len(self.data[rel]), PAGE) for rel in self.files]
        self.tensor_files = sorted(self.tensors)
        self.total = sum(len(d) for d in self.data.values())


def pick_range(rng, corpus, rel):
    size = len(corpus.data[rel])
    length = max(1, int(2 ** rng.uniform(0, 21.58)))  # log-uniform, 1 byte .. 3 MiB
    length = min(length, MAX_READ)
    if rng.random() < 0.5:
        # Straddle a boundary: start up to `length` bytes before it, or just past EOF.
        edge = rng.choice(corpus.boundaries[rel])
        offset = edge - rng.randrange(0, length + 1) + rng.choice((0, 0, 0, 1, -1))
        offset = min(max(offset, 0), size + 16)
    else:
        offset = rng.randrange(size + 1) if size else 0
    return offset, length


def full_pread(fd, length, offset):
    """pread until `length` bytes or EOF (a FUSE file may return short)."""
    parts = []
    while length > 0:
        part = os.pread(fd, length, offset)
        if not part:
            break
        parts.append(part)
        length -= len(part)
        offset += len(part)
    return b"".join(parts)


class Counters:
    """Per-process counters in shared memory, so that they survive a
    reader killed by SIGBUS (an mmap of a file system that went away).
    A row per thread, written by that thread alone, with no lock: a lock
    held by one thread when another's SIGBUS killed their process stayed
    held, and the test's next read of the counters waited on it forever
    (seen under load, after the readers were done)."""

    def __init__(self, context, threads=THREADS):
        self.threads = threads
        self.array = context.Array("q", len(COUNTERS) * threads, lock=False)

    def add(self, slot, **counts):
        row = slot * len(COUNTERS)
        for name, value in counts.items():
            self.array[row + COUNTERS.index(name)] += value

    def value(self, name):
        column = COUNTERS.index(name)
        return sum(self.array[t * len(COUNTERS) + column] for t in range(self.threads))


def reader_thread(mount_path, corpus, seed, deadline, stop, counters, slot, notes, keep_open):
    """Random preads and tensor mmaps until the deadline or `stop`.
    keep_open: keep one descriptor per file (else open per operation, so
    that nothing pins the file system once it is gone). slot: the thread's
    row of `counters`."""
    rng = random.Random(seed)
    fds = {}
    consecutive_gone = 0
    try:
        while time.monotonic() < deadline and not stop.is_set():
            use_mmap = rng.random() < MMAP_SHARE
            if use_mmap:
                rel = rng.choice(corpus.tensor_files)
            else:
                rel = rng.choices(corpus.files, corpus.weights)[0]
            want_all = corpus.data[rel]
            try:
                if keep_open:
                    if rel not in fds or rng.random() < 0.02:
                        if rel in fds:
                            os.close(fds.pop(rel))
                        fds[rel] = os.open(os.path.join(mount_path, rel), os.O_RDONLY)
                    fd = fds[rel]
                else:
                    fd = os.open(os.path.join(mount_path, rel), os.O_RDONLY)
                try:
                    if use_mmap:
                        begin, end = rng.choice(corpus.tensors[rel])
                        if end == begin:
                            continue
                        base = begin - begin % mmap.ALLOCATIONGRANULARITY
                        if rng.random() < 0.5:
                            os.posix_fadvise(fd, begin, end - begin, os.POSIX_FADV_DONTNEED)
                        flags = mmap.MAP_PRIVATE if rng.random() < 0.25 else mmap.MAP_SHARED
                        with mmap.mmap(fd, end - base, flags=flags, prot=mmap.PROT_READ, offset=base) as m:
                            got = m[begin - base:end - base]
                        want = want_all[begin:end]
                        where = f"mmap {rel} [{begin}, {end})"
                    else:
                        offset, length = pick_range(rng, corpus, rel)
                        if rng.random() < 0.7:
                            # Past the page cache, so that the daemon serves it.
                            os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
                        got = full_pread(fd, length, offset)
                        want = want_all[offset:offset + length]
                        where = f"pread {rel} [{offset}, +{length})"
                finally:
                    if not keep_open:
                        os.close(fd)
            except OSError as e:
                if e.errno in GONE_ERRNOS and stop.gone:
                    counters.add(slot, gone_errors=1, **{errno.errorcode[e.errno]: 1})
                    consecutive_gone += 1
                    if consecutive_gone >= 200:
                        time.sleep(0.01)
                else:
                    counters.add(slot, errors=1)
                    notes.append(f"{type(e).__name__} {e}")
                continue
            consecutive_gone = 0
            if got == want:
                counters.add(slot, reads=1, bytes=len(got))
            elif len(got) < len(want) and want.startswith(got):
                counters.add(slot, short=1, bytes=len(got))
                notes.append(f"short: {where} gave {len(got)} of {len(want)} bytes")
            else:
                first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                             min(len(got), len(want)))
                counters.add(slot, mismatches=1)
                notes.append(f"MISMATCH: {where}: {len(got)} bytes for {len(want)}, first difference at +{first}")
    finally:
        for fd in fds.values():
            os.close(fd)


class StopFlag:
    """Whether readers should stop, and whether the file system has been
    taken away (after which errors are expected), shared across fork.
    Two bytes of shared memory with no lock, for the reason given in
    Counters: a multiprocessing.Event takes a lock in is_set(), a reader
    killed by SIGBUS while one of its threads held it left it held, and
    the test's set() then waited on it until meson's timeout (seen in CI,
    in the SIGTERM test, where most readers die of SIGBUS)."""

    STOP, GONE = 0, 1

    def __init__(self, context):
        self.flags = context.Array("b", 2, lock=False)

    def is_set(self):
        return self.flags[self.STOP] != 0

    def set(self):
        self.flags[self.STOP] = 1

    @property
    def gone(self):
        return self.flags[self.GONE] != 0

    def set_gone(self):
        self.flags[self.GONE] = 1


def reader_process(mount_path, corpus, name, seconds, stop, counters, keep_open, conn):
    notes = []
    deadline = time.monotonic() + seconds
    threads = [threading.Thread(target=reader_thread,
                                args=(mount_path, corpus, f"{name}.{t}", deadline, stop, counters, t, notes, keep_open))
               for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    conn.send(notes[:20])
    conn.close()


class Readers:
    """PROCESSES forked readers of THREADS threads each."""

    def __init__(self, mount_path, corpus, phase, seconds, keep_open, processes=PROCESSES):
        self.context = multiprocessing.get_context("fork")
        self.stop = StopFlag(self.context)
        self.counters = [Counters(self.context) for _ in range(processes)]
        self.processes = []
        self.pipes = []
        for p in range(processes):
            receive, send = self.context.Pipe(duplex=False)
            process = self.context.Process(target=reader_process, daemon=True,
                                           args=(mount_path, corpus, f"{phase}.{p}", seconds, self.stop,
                                                 self.counters[p], keep_open, send))
            process.start()
            send.close()
            self.processes.append(process)
            self.pipes.append(receive)
        self.notes = []
        self.hung = []

    def total(self, name):
        return sum(c.value(name) for c in self.counters)

    def alive(self):
        return any(p.is_alive() for p in self.processes)

    def join(self, timeout):
        """Bounded: processes still alive after `timeout` are recorded as
        hung and killed."""
        end = time.monotonic() + timeout
        for process, pipe in zip(self.processes, self.pipes):
            process.join(max(0.0, end - time.monotonic()))
            if process.is_alive():
                self.hung.append(process.pid)
                process.kill()
                process.join(10)
            elif pipe.poll(0):
                try:
                    self.notes += pipe.recv()
                except EOFError:
                    pass
            pipe.close()
        return [p.exitcode for p in self.processes]

    def summary(self):
        return {name: self.total(name) for name in COUNTERS}

    def gone_errors(self):
        """'N errors once gone (ENOENT 10, ...)'"""
        kinds = ", ".join(f"{name} {self.total(name)}" for name in COUNTERS[6:] if self.total(name))
        return f"{self.total('gone_errors')} errors once gone" + (f" ({kinds})" if kinds else "")


def sanitized_daemon():
    """An AddressSanitizer build: its shadow memory and quarantine make the
    resident size say nothing about the daemon's own bound."""
    with open(os.environ["PTWMFS"], "rb") as f:
        return b"__asan_init" in f.read()


def exit_timeout():
    """Seconds the daemon has to exit once its file system is taken away:
    0.03-0.25 s seen; an AddressSanitizer build on a loaded machine is
    given 4x meson's timeouts, and four times this too."""
    return 40 if sanitized_daemon() else 10


def memory_kib(pid):
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split()[:2]
                values[key[:-1]] = int(value)
    return values


class Stress(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = TempDir()
        tmp = cls.tmp.__enter__()
        cls.original = os.path.join(tmp, "model")
        cls.store = os.path.join(tmp, "store")
        make_model.make_model(cls.original, seed=4, scale=4)
        make_model.make_model(os.path.join(cls.original, "second"), seed=6, scale=6)
        make_shards(os.path.join(cls.original, "shards"), seed=8)
        pack(cls.original, cls.store)
        cls.corpus = Corpus(cls.original, cls.store)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.__exit__(None, None, None)

    def assert_clean_teardown(self, mount, readers, within, how):
        """The daemon exits by itself with 0, readers stop without hanging,
        no mount is left."""
        try:
            status = mount.process.wait(timeout=within)
        except subprocess.TimeoutExpired:
            status = None
        exit_seconds = time.monotonic() - self.taken_at
        readers.stop.set()
        exitcodes = readers.join(timeout=15)
        if status is None:  # leave nothing behind before failing
            mount.process.kill()
            mount.process.wait(timeout=60)
        self.assertIsNotNone(status, f"the daemon did not exit within {within} s of {how}:\n{mount.log()}")
        self.assertEqual(status, 0, f"daemon exit status after {how}:\n{mount.log()}")
        self.assertEqual(readers.hung, [], f"readers hung after {how}")
        # A reader may die of SIGBUS touching an mmap of a connection that
        # was aborted: the kernel's answer, not a hang.
        for code in exitcodes:
            self.assertIn(code, (0, -signal.SIGBUS), f"reader exit codes {exitcodes}: {readers.notes}")
        self.assertFalse(mount_guard.mounted(mount.path), f"{mount.path} is still mounted after {how}")
        self.assertEqual(readers.total("mismatches"), 0, readers.notes)
        self.assertEqual(readers.total("errors"), 0, readers.notes)
        return status, exit_seconds, exitcodes

    def start_and_warm(self, mount, phase, processes):
        """A fresh batch of open-per-operation readers, running until told
        to stop, once each has done some reads."""
        readers = Readers(mount.path, self.corpus, phase, 60, keep_open=False, processes=processes)
        end = time.monotonic() + 4 * exit_timeout()
        while time.monotonic() < end and not all(c.value("reads") >= 5 for c in readers.counters):
            time.sleep(0.05)
        if not all(c.value("reads") >= 5 for c in readers.counters):
            readers.stop.set()
            readers.join(timeout=15)
            self.fail(f"readers did not get going: {readers.summary()}")
        return readers

    def test_1_load_then_unmount_under_readers(self):
        corpus = self.corpus
        self.assertGreater(corpus.total, 16 * CACHE)
        with Mount(self.store, f"cache_size={CACHE}") as mount:
            pid = mount.process.pid
            started = time.monotonic()
            readers = Readers(mount.path, corpus, "load", SECONDS, keep_open=True)
            peak_rss = 0
            samples = 0
            while readers.alive() and time.monotonic() < started + SECONDS + 30:
                peak_rss = max(peak_rss, memory_kib(pid)["VmRSS"])
                samples += 1
                time.sleep(0.05)
            exitcodes = readers.join(timeout=30)
            duration = time.monotonic() - started
            hwm = memory_kib(pid)["VmHWM"]
            stats = mount.stats()
            load = readers.summary()
            self.assertEqual(readers.hung, [])
            self.assertEqual(exitcodes, [0] * PROCESSES, readers.notes)
            self.assertEqual(load["mismatches"], 0, readers.notes)
            self.assertEqual(load["short"], 0, readers.notes)
            self.assertEqual(load["errors"], 0, readers.notes)
            self.assertGreater(load["reads"], 100)
            self.assertGreater(stats["cache"]["evictions"], 0)
            self.assertLessEqual(stats["cache"]["cached_bytes"], stats["cache"]["capacity_bytes"])
            peak = max(hwm, peak_rss) * 1024
            if not sanitized_daemon():
                self.assertLess(peak, CACHE + ALLOWANCE, f"daemon peak resident {peak >> 20} MiB")

            # Take the file system away under a fresh batch of readers.
            after = self.start_and_warm(mount, "unmount", PROCESSES)
            self.taken_at = time.monotonic()
            after.stop.set_gone()
            how = mount_guard.unmount(mount.path, lazy=False)
            status, exit_seconds, _ = self.assert_clean_teardown(mount, after, exit_timeout(), how)
            gone = after.summary()
            print(f"\nstress: {PROCESSES} processes x {THREADS} threads, {load['reads']} reads "
                  f"({load['bytes'] / 2**20:.0f} MiB checked, 0 mismatches, 0 errors) in {duration:.1f} s "
                  f"over {len(corpus.files)} files of {corpus.total / 2**20:.1f} MiB; cache {CACHE >> 20} MiB, "
                  f"{stats['cache']['evictions']} evictions; daemon peak RSS {peak / 2**20:.1f} MiB "
                  f"(VmHWM {hwm / 1024:.1f} MiB, {samples} samples, limit {(CACHE + ALLOWANCE) >> 20} MiB"
                  f"{', not applied: AddressSanitizer build' if sanitized_daemon() else ''})")
            print(f"stress: {how} under {PROCESSES * THREADS} readers ({gone['reads']} exact reads, "
                  f"{after.gone_errors()}): daemon exit {status} after {exit_seconds:.2f} s, "
                  f"no mount left", flush=True)

    def test_2_sigterm_under_readers(self):
        with Mount(self.store, f"cache_size={CACHE}") as mount:
            readers = self.start_and_warm(mount, "sigterm", 4)
            time.sleep(1)
            self.taken_at = time.monotonic()
            readers.stop.set_gone()
            mount.process.send_signal(signal.SIGTERM)
            status, exit_seconds, exitcodes = self.assert_clean_teardown(mount, readers, exit_timeout(), "SIGTERM")
            gone = readers.summary()
            print(f"\nstress: SIGTERM under {4 * THREADS} readers ({gone['reads']} exact reads, "
                  f"{readers.gone_errors()}, reader exits {exitcodes}): daemon exit {status} "
                  f"after {exit_seconds:.2f} s, no mount left", flush=True)


if __name__ == "__main__":
    unittest.main()
