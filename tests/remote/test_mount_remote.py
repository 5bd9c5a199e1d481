#!/usr/bin/env python3
"""The daemon on a remote tree: `ptwmfs http://HOST/PATH/ MOUNTPOINT` over
nginx on loopback. Every file byte-identical through read and mmap; one
full read fetches at most 1.05x the packed bytes (counted by nginx); an
object replaced under the mount fails reads with EIO and the daemon lives;
a damaged disk-cache entry is fetched again; with the server gone a fresh
mount over the disk cache serves everything; fetched blocks in memory stay
within one bound for a tree of many files; a large plain file is read by
range; with the server gone, concurrent readers of a file share one attempt
and fail together.

`ptwmfs s3://BUCKET/PREFIX MOUNTPOINT` against SeaweedFS: every corpus file
byte-identical; wrong credentials; the gateway stopped mid-read (also with
a fetch-ahead window in flight): the read waits and completes, or fails
with EIO after remote_timeout, and the daemon lives; an object replaced
under the mount: old bytes or EIO, never new or mixed ones, one log line;
two mounts sharing one disk cache; one volume server stopped."""
import errno
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import remote_testlib as rt  # noqa: E402

sys.path.insert(0, os.path.join(rt.SOURCE_ROOT, "tests", "mount"))
import ptwmfs_testlib as mt  # noqa: E402
from mount_guard import run_not_mounting  # noqa: E402

CORPUS = Path(rt.SOURCE_ROOT).parent / "shared" / "corpus"
TOOL = os.environ.get("PTWMFS_TOOL", os.path.join(rt.SOURCE_ROOT, "build", "tools", "ptwmfs-tool", "ptwmfs-tool"))


def write_random_checkpoint(path, megabytes, seed):
    """A safetensors file of one BF16 tensor of seeded random bytes: larger
    than a fetch-ahead window even stored (random bytes barely compress)."""
    import json
    import random
    data = random.Random(seed).randbytes(megabytes << 20)
    header = json.dumps({"w": {"dtype": "BF16", "shape": [len(data) // 2], "data_offsets": [0, len(data)]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header + data)


def files_below(root):
    out = []
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            if not p.is_symlink():
                out.append(p.relative_to(root))
    return sorted(out)


class MountOverHttp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="ptwm-rmount-"))
        cls.src = cls.tmp / "model"
        mt.make_model.make_model(str(cls.src), seed=5, scale=2)
        if CORPUS.is_dir():
            # Large enough (about 9 MiB stored) that most of its blocks are
            # fetched only when read, not at open.
            shutil.copy(CORPUS / "esrgan-thick-x4.BF16.safetensors", cls.src / "esrgan.BF16.safetensors")
            shutil.copy(CORPUS / "posenet.F8_E4M3.safetensors", cls.src / "posenet.F8.safetensors")
        os.symlink("esrgan.BF16.safetensors" if CORPUS.is_dir() else "model.safetensors", cls.src / "alias")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.work = Path(tempfile.mkdtemp(prefix="case-", dir=self.tmp))
        self.packed = self.work / "packed"
        subprocess.run([TOOL, "pack", "--manifest", self.src, self.packed], check=True, capture_output=True)
        self.cache = self.work / "cache"

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def options(self, extra=""):
        return f"disk_cache={self.cache},remote_timeout=5" + (f",{extra}" if extra else "")

    def assert_all_identical(self, mount, mmap_too=True):
        for rel in files_below(self.src):
            want = mt.sha256_read(self.src / rel)
            self.assertEqual(mt.sha256_read(mount / str(rel)), want, f"{rel} by read")
            if mmap_too:
                self.assertEqual(mt.sha256_mmap(mount / str(rel)), want, f"{rel} by mmap")
        self.assertEqual(os.readlink(mount / "alias"), os.readlink(self.src / "alias"))

    def test_every_file_identical_and_fetched_once(self):
        with rt.Nginx(self.packed) as web:
            with mt.Mount(web.url, self.options()) as m:
                self.assertEqual(sorted(os.listdir(m.path)), sorted(os.listdir(self.src)))
                for rel in files_below(self.src):
                    self.assertEqual(os.stat(m / str(rel)).st_size, os.stat(self.src / rel).st_size)
                self.assert_all_identical(m, mmap_too=False)
                fetched = web.body_bytes_sent(m.stats()["remote"]["requests"])
                packed = sum(os.path.getsize(self.packed / f) for f in files_below(self.packed))
                self.assertLessEqual(fetched, 1.05 * packed, f"fetched {fetched} bytes for {packed} packed")
                remote = m.stats()["remote"]
                self.assertGreater(remote["requests"], 0)
                self.assertGreaterEqual(remote["bytes_fetched"], fetched * 0.95)
                if CORPUS.is_dir():  # esrgan is 9 MiB stored: read in order, its blocks come fetched ahead
                    self.assertGreater(remote["ahead_blocks"], 0)
                print(f"fetched {fetched} bytes by nginx's count for {packed} packed "
                      f"({fetched / packed:.4f}); {remote}", file=sys.stderr)
                self.assert_all_identical(m)  # mmap too, now from the caches

    def test_a_single_store_url(self):
        # http://HOST/PATH/NAME.ptwm, as pack writes one file: the mount holds
        # NAME alone, its size from the store's superblock (no manifest).
        want = self.src / "model.safetensors"
        with rt.Nginx(self.packed) as web:
            with mt.Mount(web.url + "model.safetensors.ptwm", self.options()) as m:
                self.assertEqual(os.listdir(m.path), ["model.safetensors"])
                got = m / "model.safetensors"
                self.assertEqual(os.stat(got).st_size, want.stat().st_size)
                self.assertEqual(mt.sha256_read(got), mt.sha256_read(want))
                self.assertEqual(mt.sha256_mmap(got), mt.sha256_read(want))
            missing = web.url + "absent.safetensors.ptwm"
            mountpoint = self.work / "mnt"
            mountpoint.mkdir()
            result, mounted = run_not_mounting([mt.executable("PTWMFS"), missing, str(mountpoint), "-o", self.options()],
                                               str(mountpoint))
            self.assertNotEqual(result.returncode, 0, result.stderr)
            self.assertIn(missing, result.stderr)
            self.assertFalse(mounted)

    def test_a_plain_file_replaced_by_a_repack_is_not_served_from_the_disk_cache(self):
        # The disk cache kept plain files by path and size: a config.json of
        # the same size, packed again, was served as the old one forever.
        plain = next(p for p in files_below(self.src) if not str(p).endswith(".safetensors"))
        before = (self.src / plain).read_bytes()
        with rt.Nginx(self.packed) as web:
            with mt.Mount(web.url, self.options()) as m:
                self.assertEqual(Path(m / str(plain)).read_bytes(), before)
            after = bytes(reversed(before)) if before != bytes(reversed(before)) else before.swapcase()
            self.assertEqual(len(after), len(before))
            (self.packed / plain).write_bytes(after)
            os.utime(self.packed / plain, (1e9, 1e9))  # another version by nginx's ETag, whatever the clock
            with mt.Mount(web.url, self.options()) as m:
                self.assertEqual(Path(m / str(plain)).read_bytes(), after)

    def test_a_plain_file_over_64_mib(self):
        # Plain files were fetched by one GET whose body was capped at 64 MiB,
        # then whole into memory on every open: one page of a 65 MiB file
        # cost 65 MiB of download and of RAM. They are read by range now.
        tree = self.work / "big"
        tree.mkdir()
        big = tree / "pytorch_model.bin"
        with open(big, "wb") as f:
            f.write(os.urandom((65 << 20) + 3))
        packed = self.work / "big-packed"
        subprocess.run([TOOL, "pack", "--manifest", tree, packed], check=True, capture_output=True)
        with rt.Nginx(packed) as web:
            with mt.Mount(web.url, self.options()) as m:
                with open(m / "pytorch_model.bin", "rb") as f, open(big, "rb") as want:
                    at = 40 << 20
                    self.assertEqual(os.pread(f.fileno(), 4096, at), os.pread(want.fileno(), 4096, at))
                    end = os.pread(f.fileno(), 4096, (65 << 20) - 1)  # the last 4 bytes, across the end
                    self.assertEqual(end, os.pread(want.fileno(), 4096, (65 << 20) - 1))
                    self.assertEqual(len(end), 4)
                fetched = web.body_bytes_sent(m.stats()["remote"]["requests"])
                self.assertLess(fetched, 8 << 20, f"{fetched} bytes fetched for two reads of 4 KiB")
                self.assertEqual(mt.sha256_read(m / "pytorch_model.bin"), mt.sha256_read(big))
                self.assertEqual(mt.sha256_mmap(m / "pytorch_model.bin"), mt.sha256_read(big))
                fetched = web.body_bytes_sent(m.stats()["remote"]["requests"])
                self.assertLessEqual(fetched, 1.05 * big.stat().st_size, f"{fetched} bytes fetched for one file")
            out = self.work / "big-out"
            subprocess.run([TOOL, "unpack", web.url, out], check=True, capture_output=True, timeout=300)
            self.assertEqual(mt.sha256_read(out / "pytorch_model.bin"), mt.sha256_read(big))
            p = subprocess.run([TOOL, "verify", web.url, "--against", tree], capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_blocks_in_memory_stay_within_one_bound_for_the_whole_tree(self):
        # Every remote file had kept up to 32 fetched 1 MiB blocks for the
        # life of the mount: 21 MiB more resident memory per file read.
        tree = self.work / "shards"
        tree.mkdir()
        for i in range(5):
            write_random_checkpoint(tree / f"model-{i:05d}-of-00005.safetensors", 20, seed=i)
        packed = self.work / "shards-packed"
        subprocess.run([TOOL, "pack", "--manifest", tree, packed], check=True, capture_output=True)
        with rt.Nginx(packed) as web:
            with mt.Mount(web.url, self.options()) as m:
                for name in sorted(os.listdir(tree)):
                    self.assertEqual(mt.sha256_read(m / name), mt.sha256_read(tree / name), name)
                remote = m.stats()["remote"]
                self.assertEqual(remote["memory_limit"], 64 << 20)
                self.assertLessEqual(remote["memory_bytes"], remote["memory_limit"], remote)
                self.assertGreater(remote["memory_bytes"], 0, remote)

    def readers_at_once(self, path, offsets, patience):
        """Reads 4 KiB of `path` at each offset, each on a thread of its
        own, all at once; returns [(errno or "read", seconds)]."""
        import threading
        import time
        results = [None] * len(offsets)

        def read(i):
            start = time.monotonic()
            fd = os.open(path, os.O_RDONLY)
            try:
                os.pread(fd, 4096, offsets[i])
                results[i] = ("read", time.monotonic() - start)
            except OSError as e:
                results[i] = (e.errno, time.monotonic() - start)
            finally:
                os.close(fd)
        threads = [threading.Thread(target=read, args=(i,)) for i in range(len(offsets))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(patience)
        self.assertFalse(any(t.is_alive() for t in threads), f"{path}: a reader still waits")
        return results

    def test_concurrent_readers_in_an_outage_share_one_attempt(self):
        # Readers queued behind an attempt under way (a file's opening, a
        # store's index, a block's range GET), and each made its own once
        # that one had failed: with the server gone the 8th of 8 readers
        # waited some 8 remote_timeouts for its EIO (27-48 s at 3 s). Those
        # that wait for an attempt now take its outcome; the next read
        # after it tries again.
        tree = self.work / "outage"
        tree.mkdir()
        write_random_checkpoint(tree / "model.safetensors", 9, seed=7)
        (tree / "pytorch_model.bin").write_bytes(os.urandom(9 << 20))
        packed = self.work / "outage-packed"
        subprocess.run([TOOL, "pack", "--manifest", tree, packed], check=True, capture_output=True)
        timeout, readers = 3, 8
        names = ("model.safetensors", "pytorch_model.bin")
        cases = {
            # Nothing opened yet: the store's index, the plain file's HEAD.
            "first readers": [i << 20 for i in range(readers)],
            # Opened, then one 1 MiB block, read in pages apart enough that
            # the kernel's read-ahead asks for each.
            "readers of one block": [(6 << 20) + (i << 17) for i in range(readers)],
        }
        for case, offsets in cases.items():
            web = rt.Nginx(packed).__enter__()
            try:
                cache = self.work / f"cache-{len(case)}"
                with mt.Mount(web.url, f"disk_cache={cache},remote_timeout={timeout}") as m:
                    if case == "readers of one block":
                        for name in names:
                            with open(m / name, "rb", buffering=0) as f:
                                self.assertEqual(len(f.read(4096)), 4096)
                    web.__exit__()
                    for name in names:
                        results = self.readers_at_once(m / name, offsets, readers * timeout * 4)
                        self.assertEqual({r[0] for r in results}, {errno.EIO}, f"{case} of {name}: {results}")
                        slowest = max(r[1] for r in results)
                        # One attempt, and the kernel's own retry of a
                        # failed read-ahead: two timeouts, not one a reader.
                        self.assertLess(slowest, 2.5 * timeout, f"{case} of {name}: {results}")
                        print(f"{readers} {case} of {name} failed with EIO within {slowest:.1f} s "
                              f"at remote_timeout={timeout}", file=sys.stderr)
                    self.assertTrue(os.listdir(m.path))  # the daemon lives
            finally:
                web.__exit__()

    def test_wrong_answers_to_range_reads_are_fetched_again(self):
        # A store's bytes answered wrong once, with the Content-Range asked for
        # (the disk cache kept them, and every later mount failed), or the
        # next range's bytes under its Content-Range: the reads still give
        # the original.
        def wrong_bytes(path, status, headers, body):
            if status != 206 or not path.endswith(".ptwm") or len(body) < 4096:
                return None
            return status, headers, bytes(b ^ 0x5A for b in body)

        def wrong_range(path, status, headers, body):
            if status != 206 or not path.endswith(".ptwm"):
                return None
            first, rest = headers["Content-Range"].split(" ")[1].split("-")
            last, total = rest.split("/")
            # The next range's bytes, as its Content-Range says (the last byte made up).
            return status, {**headers, "Content-Range": f"bytes {int(first) + 1}-{int(last) + 1}/{total}"}, body[1:] + b"\0"

        for lie in (wrong_bytes, wrong_range):
            with self.subTest(lie=lie.__name__):
                shutil.rmtree(self.cache, ignore_errors=True)
                with rt.Nginx(self.packed) as web, rt.Proxy(web.url) as proxy:
                    proxy.lies.append(lie)
                    with mt.Mount(proxy.url + "/", self.options()) as m:
                        self.assert_all_identical(m, mmap_too=False)
                    self.assertEqual(proxy.lies_told, 1)
                    # Nothing wrong stayed in the disk cache.
                    with mt.Mount(web.url, self.options()) as m:
                        self.assert_all_identical(m, mmap_too=False)

    def test_a_store_replaced_on_a_server_without_etags(self):
        # Blocks were cached by URL and block number where the server sends
        # no ETag: a store packed again mixed old and new blocks in a mount
        # over the same disk cache. Size and Last-Modified now tell them apart.
        with rt.Nginx(self.packed) as web, rt.Proxy(web.url) as proxy:
            proxy.drop_headers.add("ETag")
            with mt.Mount(proxy.url + "/", self.options()) as m:
                self.assert_all_identical(m, mmap_too=False)
            changed = self.work / "changed"
            mt.make_model.make_model(str(changed), seed=6, scale=2)  # other weights, the same names
            subprocess.run([TOOL, "pack", "--manifest", changed, self.packed], check=True, capture_output=True)
            for store in self.packed.glob("*.ptwm"):
                os.utime(store, (2e9, 2e9))  # another Last-Modified, whatever the clock
            with mt.Mount(proxy.url + "/", self.options()) as m:
                for rel in files_below(changed):
                    self.assertEqual(mt.sha256_read(m / str(rel)), mt.sha256_read(changed / rel), rel)

    def test_damaged_disk_cache_entry_is_fetched_again(self):
        with rt.Nginx(self.packed) as web:
            with mt.Mount(web.url, self.options()) as m:
                self.assert_all_identical(m, mmap_too=False)
                requests = m.stats()["remote"]["requests"]
            entries = sorted(self.cache.glob("*.entry"), key=lambda p: p.stat().st_size)
            self.assertTrue(entries)
            for e in entries:  # flip one byte in the middle of every entry
                data = bytearray(e.read_bytes())
                data[len(data) // 2] ^= 0x20
                e.write_bytes(bytes(data))
            before = web.body_bytes_sent(requests)
            with mt.Mount(web.url, self.options()) as m:
                self.assert_all_identical(m, mmap_too=False)
                requests += m.stats()["remote"]["requests"]
            self.assertGreater(web.body_bytes_sent(requests), before, "damaged entries were not fetched again")

    def test_server_gone_fresh_mount_serves_from_disk_cache(self):
        with rt.Nginx(self.packed) as web:
            url = web.url
            with mt.Mount(url, self.options()) as m:
                self.assert_all_identical(m, mmap_too=False)
        # nginx is stopped: nothing answers at that address any more.
        with mt.Mount(url, self.options("remote_timeout=2")) as m:
            self.assert_all_identical(m)

    @unittest.skipUnless(CORPUS.is_dir(), "needs ../shared/corpus for a store larger than the blocks read at open")
    def test_object_replaced_under_the_mount_fails_with_eio(self):
        with rt.Nginx(self.packed) as web:
            with mt.Mount(web.url, self.options()) as m:
                store = self.packed / "esrgan.BF16.safetensors.ptwm"
                other = self.work / "other.ptwm"
                subprocess.run([TOOL, "pack", "--level", "1", CORPUS / "esrgan-thick-x4.F16.safetensors", other],
                               check=True, capture_output=True)
                os.replace(other, store)  # new size and mtime: a new ETag
                with self.assertRaises(OSError) as raised:
                    mt.sha256_read(m / "esrgan.BF16.safetensors")
                self.assertEqual(raised.exception.errno, errno.EIO)
                self.assertIn("changed since it was opened", m.log())
                # The daemon lives and serves the rest.
                self.assertEqual(mt.sha256_read(m / "model.safetensors"), mt.sha256_read(self.src / "model.safetensors"))



@unittest.skipUnless(rt.weed_path(), rt.WEED_MISSING)
class MountOverS3(unittest.TestCase):
    """`ptwmfs s3://BUCKET/PREFIX` against SeaweedFS: two volume servers with
    replication, a filer and the S3 gateway, on loopback."""

    @classmethod
    def setUpClass(cls):
        rt.seaweedfs_for_class(cls, "ptwm-s3mount-")
        if CORPUS.is_dir():
            cls.src = CORPUS
        else:
            cls.src = cls.tmp / "model"
            mt.make_model.make_model(str(cls.src), seed=7, scale=2)
        cls.url = "s3://models/corpus"
        subprocess.run([TOOL, "pack", cls.src, cls.url], check=True, capture_output=True)
        cls.big = max(files_below(cls.src), key=lambda p: os.path.getsize(cls.src / p))
        # 40 MiB stored: a read of its first megabytes leaves most of it
        # unfetched, even with a fetch-ahead window in flight.
        cls.window_src = cls.tmp / "window"
        cls.window_src.mkdir()
        write_random_checkpoint(cls.window_src / "random.safetensors", 40, seed=3)
        cls.window_url = "s3://models/window"
        subprocess.run([TOOL, "pack", cls.window_src, cls.window_url], check=True, capture_output=True)

    def options(self, cache, extra=""):
        return f"disk_cache={cache},remote_timeout=30" + (f",{extra}" if extra else "")

    def fresh_cache(self):
        return Path(tempfile.mkdtemp(prefix="cache-", dir=self.tmp))

    def test_every_corpus_file_identical_by_read_and_mmap(self):
        with mt.Mount(self.url, self.options(self.fresh_cache(), "stats")) as m:
            for rel in files_below(self.src):
                want = mt.sha256_read(self.src / rel)
                self.assertEqual(mt.sha256_read(m / str(rel)), want, f"{rel} by read")
                self.assertEqual(mt.sha256_mmap(m / str(rel)), want, f"{rel} by mmap")

    def test_wrong_credentials_fail_the_mount_saying_so(self):
        mnt = tempfile.mkdtemp(dir=self.tmp)
        env = dict(os.environ, AWS_SECRET_ACCESS_KEY="not-the-secret")
        # In the foreground: mounted after all, the daemon would run until
        # the timeout kills it, and leave its mount (run_not_mounting removes it).
        p, mounted = run_not_mounting([mt.executable("PTWMFS"), self.url, mnt, "-f", "-o",
                                       self.options(self.fresh_cache())], mnt, timeout=120, env=env)
        self.assertFalse(mounted)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("credentials are wrong", p.stderr)

    # Without the corpus the largest store is fetched whole (read and
    # fetch-ahead) before the gateway stops: nothing would be left to wait for.
    @unittest.skipUnless(CORPUS.is_dir(), "needs ../shared/corpus for a store larger than the blocks read at open")
    def test_gateway_stopped_mid_read_then_back(self):
        import threading
        with mt.Mount(self.url, self.options(self.fresh_cache())) as m:
            path = m / str(self.big)
            with open(path, "rb", buffering=0) as f:
                first = f.read(1 << 20)
                self.cluster.stop_gateway()
                result = {}
                reader = threading.Thread(target=lambda: result.update(rest=f.read()))
                reader.start()
                reader.join(3)
                try:
                    self.assertTrue(reader.is_alive(), "the read finished without the gateway")
                finally:  # the tests after this one need the gateway, whatever happened here
                    self.cluster.start_gateway()
                reader.join(120)
                self.assertFalse(reader.is_alive())
            digest = __import__("hashlib").sha256(first + result["rest"]).hexdigest()
            self.assertEqual(digest, mt.sha256_read(self.src / self.big))

    def test_gateway_stopped_read_fails_with_eio_after_the_timeout(self):
        with mt.Mount(self.url, f"disk_cache={self.fresh_cache()},remote_timeout=3") as m:
            self.cluster.stop_gateway()
            try:
                with self.assertRaises(OSError) as raised:
                    mt.sha256_read(m / str(self.big))
                self.assertEqual(raised.exception.errno, errno.EIO)
                self.assertTrue(os.listdir(m.path))  # the daemon lives
            finally:
                self.cluster.start_gateway()
            self.assertEqual(mt.sha256_read(m / str(self.big)), mt.sha256_read(self.src / self.big))

    def read_rest_while_gateway_is_down(self, m, path, head_bytes):
        """Reads `head_bytes` of `path` (a sequential reader: fetch-ahead
        starts), stops the gateway, and starts a thread reading the rest.
        Returns (head, thread, result dict: rest or error, seconds)."""
        import threading
        import time
        f = open(path, "rb", buffering=0)
        head = b""
        while len(head) < head_bytes:
            head += f.read(head_bytes - len(head))
        self.cluster.stop_gateway()
        result = {}

        def rest():
            start = time.monotonic()
            try:
                result["rest"] = f.read()
            except OSError as e:
                result["error"] = e
            finally:
                result["seconds"] = time.monotonic() - start
                f.close()
        reader = threading.Thread(target=rest)
        reader.start()
        return head, reader, result

    def test_gateway_stopped_with_a_window_in_flight_then_back(self):
        with mt.Mount(self.window_url, self.options(self.fresh_cache())) as m:
            name = "random.safetensors"
            head, reader, result = self.read_rest_while_gateway_is_down(m, m / name, 4 << 20)
            try:
                reader.join(3)
                self.assertTrue(reader.is_alive(), "the read finished without the gateway")
            finally:
                self.cluster.start_gateway()
            reader.join(120)
            self.assertFalse(reader.is_alive())
            self.assertNotIn("error", result)
            digest = __import__("hashlib").sha256(head + result["rest"]).hexdigest()
            self.assertEqual(digest, mt.sha256_read(self.window_src / name))
            self.assertGreater(m.stats()["remote"]["ahead_blocks"], 0, "the read was not fetched ahead")

    def test_gateway_stopped_with_a_window_in_flight_eio_after_the_timeout(self):
        timeout = 3
        with mt.Mount(self.window_url, f"disk_cache={self.fresh_cache()},remote_timeout={timeout}") as m:
            name = "random.safetensors"
            try:
                _, reader, result = self.read_rest_while_gateway_is_down(m, m / name, 4 << 20)
                reader.join(120)
                self.assertFalse(reader.is_alive())
                self.assertIsInstance(result.get("error"), OSError)
                self.assertEqual(result["error"].errno, errno.EIO)
                # Bounded by the timeout (a few of them: the kernel retries
                # a failed read-ahead page once more), not the 60 s default.
                self.assertLess(result["seconds"], 8 * timeout, result)
                print(f"EIO after {result['seconds']:.1f} s with remote_timeout={timeout}", file=sys.stderr)
                self.assertTrue(os.listdir(m.path))  # the daemon lives
            finally:
                self.cluster.start_gateway()
            self.assertEqual(mt.sha256_read(m / name), mt.sha256_read(self.window_src / name))

    @unittest.skipUnless(CORPUS.is_dir(), "needs ../shared/corpus for a store larger than the blocks read at open")
    def test_object_replaced_under_the_mount_fails_with_eio(self):
        src = self.tmp / "replace"
        src.mkdir()
        shutil.copy(CORPUS / "esrgan-thick-x4.BF16.safetensors", src / "esrgan.BF16.safetensors")
        shutil.copy(CORPUS / "posenet.F8_E4M3.safetensors", src / "posenet.F8.safetensors")
        url = "s3://models/replace"
        subprocess.run([TOOL, "pack", src, url], check=True, capture_output=True)
        other = self.tmp / "other.ptwm"
        subprocess.run([TOOL, "pack", "--level", "1", CORPUS / "esrgan-thick-x4.F16.safetensors", other],
                       check=True, capture_output=True)
        name = "esrgan.BF16.safetensors"
        want = (src / name).read_bytes()
        with mt.Mount(url, self.options(self.fresh_cache())) as m:
            # Opened at mount (HEAD, superblock, index): now a new version.
            self.cluster.put_object("models", "replace/" + name + ".ptwm", other.read_bytes())
            errors, at = 0, 0
            with open(m / name, "rb", buffering=0) as f:
                while at < len(want):  # every piece is the old bytes or EIO, never the new or a mix
                    try:
                        piece = os.pread(f.fileno(), 1 << 20, at)
                    except OSError as e:
                        self.assertEqual(e.errno, errno.EIO)
                        errors += 1
                        at += 1 << 20
                        continue
                    self.assertEqual(piece, want[at:at + len(piece)], f"wrong bytes at {at}")
                    self.assertTrue(piece)
                    at += len(piece)
            self.assertGreater(errors, 0, "no read failed after the object was replaced")
            # The daemon lives and serves the rest.
            self.assertEqual(mt.sha256_read(m / "posenet.F8.safetensors"), mt.sha256_read(src / "posenet.F8.safetensors"))
        # One log line for the object, however many reads fail.
        self.assertEqual(m.log().count("changed since it was opened"), 1, m.log())

    def test_two_mounts_share_one_disk_cache(self):
        import concurrent.futures
        cache = self.fresh_cache()
        files = files_below(self.src)
        want = {rel: mt.sha256_read(self.src / rel) for rel in files}
        with mt.Mount(self.url, self.options(cache)) as a, mt.Mount(self.url, self.options(cache)) as b:
            # Both read everything at once, each file by both mounts.
            jobs = [(m, rel) for rel in files for m in (a, b)]
            with concurrent.futures.ThreadPoolExecutor(6) as pool:
                got = list(pool.map(lambda job: mt.sha256_read(job[0] / str(job[1])), jobs))
            for (m, rel), digest in zip(jobs, got):
                self.assertEqual(digest, want[rel], f"{rel} through {'a' if m is a else 'b'}")
            for m in (a, b):
                self.assertEqual(m.stats()["remote"]["disk_cache_rejected"], 0, m.stats()["remote"])
        # Every entry the two wrote is whole: a third mount serves all from it.
        with mt.Mount(self.url, self.options(cache)) as c:
            for rel in files:
                self.assertEqual(mt.sha256_read(c / str(rel)), want[rel], str(rel))
            remote = c.stats()["remote"]
            self.assertEqual(remote["disk_cache_rejected"], 0, remote)
            packed = sum(e.stat().st_size for e in cache.glob("*.entry"))
            self.assertLess(remote["bytes_fetched"], 0.02 * packed, remote)

    def test_zz_one_volume_server_stopped(self):  # last: the cluster stays one volume short
        self.cluster.volumes[1].stop()
        with mt.Mount(self.url, self.options(self.fresh_cache())) as m:
            for rel in files_below(self.src):
                self.assertEqual(mt.sha256_read(m / str(rel)), mt.sha256_read(self.src / rel), str(rel))


if __name__ == "__main__":
    unittest.main(verbosity=2)
