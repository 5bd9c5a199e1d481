"""Stores load their header and index on first read, not at mount, and are
dropped again under -o index_cache: with a cap smaller than one store every
read reloads, and every file still reads back byte for byte. A store whose
superblock is sound but whose index is damaged mounts as a store, and only
its reads fail (EIO, logged once)."""
import errno
import os
import random
import struct
import threading
import unittest

from ptwmfs_testlib import Mount, TempDir, make_model, pack, regular_files, sha256_mmap, sha256_read

MODELS = 4


def make_tree(workdir):
    """MODELS small generated models side by side (three stores each),
    packed into one store directory."""
    original = os.path.join(workdir, "models")
    for m in range(MODELS):
        make_model.make_model(os.path.join(original, f"m{m}"), seed=m + 1, scale=1)
    store = os.path.join(workdir, "store")
    pack(original, store)
    return original, store


def store_paths(store):
    return sorted(os.path.join(store, rel) for rel in regular_files(store) if rel.endswith(".ptwm"))


def drop_cached_pages(path):
    """Drops the kernel's cached pages of a file of the mount, so that the
    next read of it reaches the daemon again."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def damage_index(store_file):
    """Flips a byte in the middle of the store's index section, leaving the
    superblock (and its checksum) as it is."""
    with open(store_file, "r+b") as f:
        superblock = os.pread(f.fileno(), 128, 0)
        offset, stored_length = struct.unpack_from("<QQ", superblock, 64)
        at = offset + stored_length // 2
        byte = os.pread(f.fileno(), 1, at)
        os.pwrite(f.fileno(), bytes([byte[0] ^ 0x10]), at)


class IndexCache(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = TempDir()
        workdir = cls.tmp.__enter__()
        cls.original, cls.store = make_tree(workdir)
        cls.files = regular_files(cls.original)
        cls.stores = store_paths(cls.store)
        assert len(cls.stores) >= 2 * MODELS, cls.stores

    @classmethod
    def tearDownClass(cls):
        cls.tmp.__exit__(None, None, None)

    def test_mount_loads_no_index(self):
        with Mount(self.store) as mount:
            # Listing and stat-ing every file shows every store's original size without loading it.
            for rel in self.files:
                self.assertEqual(os.stat(mount / rel).st_size, os.path.getsize(os.path.join(self.original, rel)))
            index = mount.stats()["index"]
            self.assertEqual(index["loaded_stores"], 0, index)
            self.assertEqual(index["loads"], 0, index)
            self.assertEqual(index["held_bytes"], 0, index)

            first = "m0/model.safetensors"
            self.assertEqual(sha256_read(mount / first), sha256_read(os.path.join(self.original, first)))
            index = mount.stats()["index"]
            self.assertEqual(index["loaded_stores"], 1, index)
            self.assertEqual(index["loads"], 1, index)
            self.assertGreater(index["held_bytes"], 0, index)
            self.assertEqual(index["drops"], 0, index)

    def test_tiny_cap_drops_and_reloads_and_every_byte_is_right(self):
        want = {rel: sha256_read(os.path.join(self.original, rel)) for rel in self.files}
        with Mount(self.store, "index_cache=1") as mount:
            for rel in self.files:
                self.assertEqual(sha256_read(mount / rel), want[rel], rel)
            after_reads = mount.stats()["index"]
            # A second pass, through mmap (shared and private), reloads what the first dropped.
            for rel in self.files:
                drop_cached_pages(mount / rel)
                self.assertEqual(sha256_mmap(mount / rel), want[rel], rel)
                self.assertEqual(sha256_mmap(mount / rel, private=True), want[rel], rel)
            index = mount.stats()["index"]
            log = mount.log()
        self.assertGreaterEqual(after_reads["loads"], len(self.stores), after_reads)
        self.assertGreater(index["drops"], 0, index)
        # The mmap pass loaded stores again: reloads after drops.
        self.assertGreater(index["loads"], after_reads["loads"], index)
        self.assertEqual(index["loads"] - index["drops"], index["loaded_stores"], index)
        # Bounded: what is loaded once reads are over is at most the last
        # store read and one a decode-ahead job may still hold.
        self.assertLessEqual(index["loaded_stores"], 2, index)
        self.assertEqual(index["load_failures"], 0, index)
        self.assertNotIn("not a usable store", log)

    def test_concurrent_readers_under_a_tiny_cap(self):
        """Threads reading random ranges of random files load, drop and
        reload stores under each other; every byte is still right."""
        originals = {}
        for rel in self.files:
            with open(os.path.join(self.original, rel), "rb") as f:
                originals[rel] = f.read()
        failures = []
        with Mount(self.store, "index_cache=1") as mount:
            def reader(seed):
                rng = random.Random(seed)
                try:
                    for _ in range(150):
                        rel = rng.choice(self.files)
                        want = originals[rel]
                        offset = rng.randrange(len(want)) if want else 0
                        length = rng.randrange(1, 1 << 18)
                        with open(mount / rel, "rb", buffering=0) as f:
                            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)  # reach the daemon
                            got = os.pread(f.fileno(), length, offset)
                        if got != want[offset:offset + length]:
                            failures.append((rel, offset, length))
                except Exception as e:  # reported below, not lost in the thread
                    failures.append(repr(e))
            threads = [threading.Thread(target=reader, args=(seed,)) for seed in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            index = mount.stats()["index"]
            reads = mount.stats()["reads"]
        self.assertEqual(failures, [])
        self.assertEqual(reads["errors"], 0)
        self.assertGreater(index["drops"], 0, index)
        self.assertGreater(index["loads"], len(self.stores), index)
        self.assertEqual(index["load_failures"], 0, index)

    def test_default_cap_keeps_every_store_loaded(self):
        with Mount(self.store) as mount:
            for rel in self.files:
                sha256_read(mount / rel)
            index = mount.stats()["index"]
        self.assertEqual(index["loaded_stores"], len(self.stores), index)
        self.assertEqual(index["loads"], len(self.stores), index)
        self.assertEqual(index["drops"], 0, index)
        self.assertLessEqual(index["held_bytes"], index["capacity_bytes"], index)


class DamagedIndex(unittest.TestCase):
    def test_store_with_damaged_index_mounts_and_only_its_reads_fail(self):
        with TempDir() as tmp:
            original, store = make_tree(tmp)
            damaged = os.path.join(store, "m1", "model.safetensors.ptwm")
            damage_index(damaged)
            with Mount(store) as mount:
                # Shown as the store it is (its superblock is sound), with its original size.
                names = os.listdir(mount / "m1")
                self.assertIn("model.safetensors", names)
                self.assertNotIn("model.safetensors.ptwm", names)
                self.assertEqual(os.stat(mount / "m1/model.safetensors").st_size,
                                 os.path.getsize(os.path.join(original, "m1/model.safetensors")))
                self.assertEqual(mount.stats()["index"]["loads"], 0)
                for _ in range(3):
                    with self.assertRaises(OSError) as raised:
                        sha256_read(mount / "m1/model.safetensors")
                    self.assertEqual(raised.exception.errno, errno.EIO)
                # Every other file reads back exactly.
                for rel in regular_files(original):
                    if rel != "m1/model.safetensors":
                        self.assertEqual(sha256_read(mount / rel), sha256_read(os.path.join(original, rel)), rel)
                index = mount.stats()["index"]
                # The failure is remembered: later reads do not load it again.
                self.assertEqual(index["load_failures"], 1, index)
            log = mount.log()
        lines = [line for line in log.splitlines() if "m1/model.safetensors.ptwm" in line]
        self.assertEqual(len(lines), 1, log)  # logged once, however often it is read
        self.assertIn("chunk index", lines[0])
        self.assertIn("EIO", lines[0])


if __name__ == "__main__":
    unittest.main()
