#!/usr/bin/env python3
"""ptwmfs-tool against a real object store: pack into s3:// (one PUT and
multipart uploads), unpack and verify from s3:// and from an nginx serving
the same tree over HTTP, byte-identical to the originals; wrong credentials
and missing trees give errors that say so."""
import filecmp
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import remote_testlib as rt  # noqa: E402

TOOL = os.environ.get("PTWMFS_TOOL", os.path.join(rt.SOURCE_ROOT, "build", "tools", "ptwmfs-tool", "ptwmfs-tool"))
CORPUS = Path(rt.SOURCE_ROOT).parent / "shared" / "corpus"
sys.path.insert(0, os.path.join(rt.SOURCE_ROOT, "tests", "data"))
import make_hub_cache  # noqa: E402
import make_model  # noqa: E402
from interrupted_run import run_interrupted, write_large_bf16  # noqa: E402
from verify_result import assert_one_failure  # noqa: E402


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def same_tree(a, b):
    """Every file byte-identical, every link the same target, nothing extra."""
    out = []
    for root, dirs, files in os.walk(a):
        for name in dirs + files:
            pa = Path(root) / name
            pb = Path(b) / pa.relative_to(a)
            if pa.is_symlink():
                out.append(pb.is_symlink() and os.readlink(pa) == os.readlink(pb))
            elif pa.is_file():
                out.append(pb.is_file() and not pb.is_symlink() and sha256(pa) == sha256(pb))
            else:
                out.append(pb.is_dir())
    count = lambda d: sum(len(ds) + len(fs) for _, ds, fs in os.walk(d))  # noqa: E731
    return all(out) and count(a) == count(b)


def model_tree(workdir):
    """A generated model (several dtypes, links, copied files) plus, when the
    corpus is here, a real BF16 file and one F32 file big enough to go up in
    several multipart parts."""
    src = Path(workdir) / "model"
    make_model.make_model(str(src), seed=3, scale=2)
    if CORPUS.is_dir():
        shutil.copy(CORPUS / "posenet.BF16.safetensors", src / "posenet.BF16.safetensors")
        shutil.copy(CORPUS / "esrgan-thick-x4.F32.safetensors", src / "esrgan.F32.safetensors")
    return src


def check_verify_compares_links(test, url, src, workdir, env=None):
    """verify URL --against a copy of src whose link is changed, removed, or
    joined by one the packed tree lacks: each fails and names the link."""
    other = Path(workdir) / "links"
    shutil.copytree(src, other, symlinks=True)
    link = other / "lora-link.safetensors"
    packed_link = url.rstrip("/") + "/lora-link.safetensors"

    def fails_with(message):
        assert_one_failure(test, TOOL, url, other, message, env)

    os.remove(link)
    os.symlink("adapters/other.safetensors", link)
    fails_with(f"{packed_link}: links to 'adapters/lora.safetensors', {link} to 'adapters/other.safetensors'")
    os.remove(link)
    fails_with(f"{packed_link}: a symlink to 'adapters/lora.safetensors', but {link} does not exist")
    os.symlink("adapters/lora.safetensors", link)
    os.symlink("adapters/lora.safetensors", other / "extra-link")
    fails_with(f"{other / 'extra-link'}: has no counterpart in {url}")


def run_measured(args, env, timeout=300):
    """ptwmfs-tool ARGS: (returncode, stderr, the peak resident set size of
    that process alone, in bytes). Started by a small Python of its own and
    measured there by wait4: a child's ru_maxrss counts the RSS of the
    process it was forked from, which this test's (large buffers made) would
    swamp. Killed after `timeout` s (the tool with it)."""
    measure = ("import ctypes, os, signal, subprocess, sys\n"
               "die_with_parent = lambda: ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
               "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, preexec_fn=die_with_parent)\n"
               "_, status, usage = os.wait4(p.pid, 0)\n"
               "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024)\n")
    p = subprocess.run([sys.executable, "-c", measure, TOOL, *map(str, args)], capture_output=True, text=True,
                       env=env, timeout=timeout)
    returncode, rss = map(int, p.stdout.split())
    return returncode, p.stderr, rss


@unittest.skipUnless(rt.weed_path(), rt.WEED_MISSING)
class ToolOnS3(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Class cleanups run even when setUpClass fails half way (tearDownClass
        # would not): a bucket that could not be made leaves no cluster running.
        cls.tmp = tempfile.mkdtemp(prefix="ptwm-remote-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        cls.cluster = cls.enterClassContext(rt.SeaweedFS())
        cls.cluster.make_bucket("models")
        cls.src = model_tree(cls.tmp)

    def tool(self, *args, env=None, check=True):
        p = subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True, timeout=600,
                           env=env or self.cluster.env())
        if check and p.returncode != 0:
            raise AssertionError(f"ptwmfs-tool {args} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
        return p

    def test_inspect_of_a_tree_url_says_what_it_reads(self):
        # A tree's URL is no object: inspect said only "HTTP 404".
        import numpy as np
        tree = Path(tempfile.mkdtemp(prefix="inspected-", dir=self.tmp))
        make_model.write_safetensors(str(tree / "w.safetensors"), [("w", "F32", [256], np.arange(256, dtype="<f4"))])
        url = "s3://models/tree/inspected"
        self.tool("pack", "-q", tree, url)
        p = self.tool("inspect", url, check=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("404", p.stderr)
        self.assertIn("inspect reads one store (URL/NAME.ptwm), and 'verify' a whole tree at a URL", p.stderr)
        self.assertEqual(self.tool("inspect", f"{url}/w.safetensors.ptwm").returncode, 0)

    def test_pack_to_s3_then_unpack_and_verify_byte_identical(self):
        url = "s3://models/tree/v1"
        # 5M parts: the F32 corpus store goes up as a multipart upload.
        self.tool("pack", self.src, url, "--part-size", "5M", "--parallel", "3")
        out = Path(self.tmp) / "unpacked"
        self.tool("unpack", url, out)
        self.assertTrue(same_tree(self.src, out), "unpacked tree differs from the original")
        p = self.tool("verify", url, "--against", self.src)
        self.assertIn("identical to the original", p.stdout)
        self.assertNotIn("FAILED", p.stdout)

    def test_single_store_url(self):
        original = next(p for p in sorted(self.src.iterdir()) if p.name.endswith(".safetensors") and p.is_file()
                        and not p.is_symlink())
        url = f"s3://models/one/{original.name}.ptwm"
        self.tool("pack", original, url)
        self.tool("verify", url, "--against", original)
        out = Path(self.tmp) / "one.safetensors"
        self.tool("unpack", url, out)
        self.assertEqual(sha256(out), sha256(original))

    def test_verify_reports_a_difference(self):
        url = "s3://models/diff/v1"
        self.tool("pack", self.src, url)
        other = Path(self.tmp) / "other"
        shutil.copytree(self.src, other, symlinks=True)
        target = next(p for p in sorted(other.iterdir()) if p.suffix == ".safetensors" and not p.is_symlink())
        data = bytearray(target.read_bytes())
        data[-1] ^= 1
        target.write_bytes(bytes(data))
        p = self.tool("verify", url, "--against", other, check=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("differs from", p.stdout)

    def test_verify_compares_links(self):
        url = "s3://models/links/v1"
        self.tool("pack", self.src, url)
        check_verify_compares_links(self, url, self.src, self.tmp, env=self.cluster.env())

    def test_wrong_credentials_say_so(self):
        url = "s3://models/creds/v1"
        self.tool("pack", self.src, url)
        env = self.cluster.env(AWS_SECRET_ACCESS_KEY="not-the-secret")
        for args in (("unpack", url, Path(self.tmp) / "never"), ("pack", self.src, "s3://models/creds/v2")):
            p = self.tool(*args, env=env, check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("credentials are wrong", p.stderr)
            self.assertIn("HTTP 403", p.stderr)
        self.assertFalse((Path(self.tmp) / "never").exists())

    def test_profile_from_aws_files(self):
        url = "s3://models/profile/v1"
        aws = Path(self.tmp) / "aws"
        aws.mkdir(exist_ok=True)
        (aws / "credentials").write_text(f"[store]\naws_access_key_id = {rt.ACCESS_KEY}\n"
                                         f"aws_secret_access_key = {rt.SECRET_KEY}\n")
        (aws / "config").write_text(f"[profile store]\nregion = {rt.REGION}\nendpoint_url = {self.cluster.endpoint}\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_SHARED_CREDENTIALS_FILE=str(aws / "credentials"), AWS_CONFIG_FILE=str(aws / "config"))
        self.tool("pack", self.src, url, "--profile", "store", env=env)
        self.tool("verify", url, "--against", self.src, "--profile", "store", env=env)

    def test_interrupted_repack_leaves_a_whole_tree_or_none_and_no_upload(self):
        url = "s3://models/interrupted/v1"
        self.tool("pack", self.src, url)
        # The same tree with one more file, packed last and large enough to
        # go up in several parts: the signal comes as the upload starts.
        bigger = Path(self.tmp) / "bigger"
        shutil.copytree(self.src, bigger, symlinks=True)
        write_large_bf16(bigger / "zz-last.safetensors", 24 << 20)
        temp = Path(self.tmp) / "tmpdir"
        temp.mkdir()
        returncode, err = run_interrupted(
            [TOOL, "pack", bigger, url, "--part-size", "5M", "--parallel", "1"],
            lambda: bool(list(temp.glob("ptwmfs-pack-*/tree/zz-last.safetensors.ptwm"))),
            env=self.cluster.env(TMPDIR=str(temp)))
        if returncode == 0:
            self.skipTest("the upload ended before the signal came: nothing interrupted")
        self.assertEqual(returncode, 128 + signal.SIGINT, err)
        self.assertIn("interrupted by SIGINT", err)
        self.assertEqual(list(temp.iterdir()), [], "the packed tree was left in TMPDIR")
        self.assertNotIn(b"<Upload>", self.cluster.get("models?uploads="), "a multipart upload was left open")
        # A manifest there means a whole tree: the old one (the signal came
        # before the upload) or none at all, never a mix.
        p = self.tool("verify", url, "--against", self.src, check=False)
        if p.returncode != 0:
            self.assertIn("no packed tree here", p.stderr)

    def open_uploads(self, prefix):
        """The keys under `prefix` with a multipart upload in progress, one per upload."""
        listing = self.cluster.get("models?uploads=").decode()
        return [k for k in re.findall(r"<Key>([^<]*)</Key>", listing) if k.startswith(prefix)]

    def test_parallel_bounds_the_parts_in_memory_across_the_whole_pack(self):
        # Four incompressible files of four 8 MiB parts each. --parallel 4
        # holds at most 4 parts (each a buffer in memory), whichever files
        # they belong to: 3 parts more than --parallel 1. (It once took 4
        # files at a time and 4 parts of each: +114 MiB, 14 parts more.)
        src = Path(self.tmp) / "four-files"
        src.mkdir()
        for i in range(4):
            (src / f"f{i}.bin").write_bytes(os.urandom(32 << 20))
        part = 8 << 20
        rss = {}
        for n in (1, 4):
            url = f"s3://models/parallel/p{n}"
            returncode, err, rss[n] = run_measured(["pack", "-q", src, url, "--part-size", "8M", "--parallel", n],
                                                   self.cluster.env())
            self.assertEqual(returncode, 0, err)
            self.tool("verify", url, "--against", src)
        extra = rss[4] - rss[1]
        self.assertLess(extra, 5 * part, f"--parallel 4 peaked {extra / 2**20:.0f} MiB above --parallel 1 "
                                         f"({rss[4] / 2**20:.0f} MiB vs {rss[1] / 2**20:.0f} MiB), for 8 MiB parts")

    def test_interrupt_while_a_multipart_upload_is_created_leaves_none_open(self):
        src = Path(self.tmp) / "create-interrupted"
        src.mkdir()
        write_large_bf16(src / "large.safetensors", 24 << 20)
        temp = Path(self.tmp) / "tmp-create-interrupted"
        temp.mkdir()
        with rt.Proxy(self.cluster.endpoint) as proxy:
            # The create reaches the server (the upload exists there); its
            # answer is held back 3 s, and the signal comes meanwhile.
            proxy.fault("delay_after", "POST", "uploads=", seconds=3)
            p = subprocess.Popen([TOOL, "pack", "-q", src, "s3://models/create-int/v1", "--part-size", "5M"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                 env=self.cluster.env(AWS_ENDPOINT_URL=proxy.url, TMPDIR=str(temp)))
            try:
                self.assertTrue(proxy.faulted.wait(120), "no multipart upload was created")
                time.sleep(0.5)
                p.send_signal(signal.SIGINT)
                _, err = p.communicate(timeout=60)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        self.assertEqual(p.returncode, 128 + signal.SIGINT, err)
        self.assertIn("interrupted by SIGINT", err)
        self.assertEqual(self.open_uploads("create-int/"), [], "the multipart upload was left open")
        self.assertEqual(list(temp.iterdir()), [], "the packed tree was left in TMPDIR")

    def test_a_create_retried_after_a_reset_leaves_no_upload_open(self):
        # The server makes the upload, the client never hears of it (its
        # connection reset) and asks again -- libcurl itself does, on a
        # kept-alive connection: the upload made first must not stay open.
        src = Path(self.tmp) / "create-reset"
        src.mkdir()
        write_large_bf16(src / "large.safetensors", 8 << 20)  # a store of 3 parts of 5 MiB
        url = "s3://models/create-reset/v1"
        with rt.Proxy(self.cluster.endpoint) as proxy:
            proxy.fault("reset_after", "POST", "uploads=")
            self.tool("pack", "-q", src, url, "--part-size", "5M", env=self.cluster.env(AWS_ENDPOINT_URL=proxy.url))
            self.assertEqual(proxy.faults, 1, "the create was never reset")
        self.assertEqual(self.open_uploads("create-reset/"), [], "an upload made by a lost create was left open")
        self.tool("verify", url, "--against", src)

    def test_missing_bucket_fails_before_the_pack(self):
        temp = Path(self.tmp) / "tmp-nobucket"
        temp.mkdir()
        p = self.tool("pack", self.src, "s3://nobucket/tree", env=self.cluster.env(TMPDIR=str(temp)), check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("there is no bucket 'nobucket'", p.stderr)
        self.assertNotIn("packed", p.stdout, "the bucket should be found missing before packing")
        self.assertEqual(list(temp.iterdir()), [])

    def test_no_tree_at_prefix(self):
        p = self.tool("unpack", "s3://models/nothing/here", Path(self.tmp) / "none", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("no packed tree here", p.stderr)


class ToolOnHttp(unittest.TestCase):
    """The same tree served by nginx over plain HTTP on loopback."""

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="ptwm-http-"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_unpack_and_verify_from_nginx(self):
        src = model_tree(self.tmp)
        packed = self.tmp / "packed"
        subprocess.run([TOOL, "pack", "--manifest", src, packed], check=True, capture_output=True)
        with rt.Nginx(packed) as web:
            out = self.tmp / "out"
            p = subprocess.run([TOOL, "unpack", web.url, out], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue(same_tree(src, out))
            p = subprocess.run([TOOL, "verify", web.url, "--against", src], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            check_verify_compares_links(self, web.url, src, self.tmp)
            # The served directory itself, its manifest being the packer's, not an original's.
            p = subprocess.run([TOOL, "verify", packed, "--against", src], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            # A damaged store on the server: verify says which chunk.
            store = next(packed.glob("*.ptwm"))
            data = bytearray(store.read_bytes())
            data[len(data) // 2] ^= 0x40
            store.write_bytes(bytes(data))
            p = subprocess.run([TOOL, "verify", web.url + store.name], capture_output=True, text=True)
            self.assertEqual(p.returncode, 1, p.stdout)
            self.assertTrue("DAMAGED" in p.stdout or "damaged" in p.stdout, p.stdout)

    def test_https_with_a_private_ca(self):
        src = model_tree(self.tmp)
        packed = self.tmp / "packed"
        subprocess.run([TOOL, "pack", "--manifest", src, packed], check=True, capture_output=True)
        with rt.Nginx(packed, tls=True) as web:
            env = {k: v for k, v in os.environ.items() if k not in ("AWS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE")}
            p = subprocess.run([TOOL, "verify", web.url], capture_output=True, text=True, env=env)
            self.assertEqual(p.returncode, 1, "a self-signed certificate should not be trusted by default")
            self.assertIn("certificate", p.stderr)
            for variable in ("AWS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"):
                p = subprocess.run([TOOL, "verify", web.url, "--against", src], capture_output=True, text=True,
                                   env={**env, variable: web.certificate})
                self.assertEqual(p.returncode, 0, f"{variable}: {p.stdout}{p.stderr}")

    def test_a_server_without_range_requests_is_named(self):
        # Python's http.server answers a range GET with the whole file (200).
        # (Reads from the start of a store are ranges from byte 0, which
        # such a server serves right while they reach the end: so a store
        # larger than what the first reads and fetch-ahead, 16 MiB, ask.)
        src = model_tree(self.tmp)
        write_large_bf16(src / "large.safetensors", 24 << 20)
        packed = self.tmp / "packed"
        subprocess.run([TOOL, "pack", "--manifest", src, packed], check=True, capture_output=True)
        port = rt.free_port()
        server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                                   "--directory", str(packed)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}/"
            rt.wait_until("http.server", lambda: rt.http_get(url + "ptwmfs-manifest.json") is not None, 30)
            p = subprocess.run([TOOL, "verify", url], capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("the server ignored the byte range", p.stdout + p.stderr)
        finally:
            server.terminate()
            server.wait(30)

    def test_unsupported_scheme_is_named(self):
        for args in (["unpack", "ftp://127.0.0.1/tree/", self.tmp / "out"], ["pack", self.tmp, "ftp://127.0.0.1/x"]):
            p = subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("ftp:// is not a scheme ptwmfs reads", p.stderr)

    def test_hub_cache_round_trips_through_nginx(self):
        # A link whose target exists in the packed tree (the copied config
        # blob) must come back as that link, and its target as a file.
        hub = self.tmp / "hub"
        make_hub_cache.make_hub_cache(str(hub))
        packed = self.tmp / "packed"
        subprocess.run([TOOL, "pack", "-q", "--manifest", hub, packed], check=True, capture_output=True)
        with rt.Nginx(packed) as web:
            out = self.tmp / "out"
            p = subprocess.run([TOOL, "unpack", web.url, out], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue(same_tree(hub, out), "unpacked hub cache differs from the original")
            config = out / make_hub_cache.REPO / "snapshots" / make_hub_cache.REVISION / "config.json"
            self.assertEqual(config.read_text(), '{"hidden_size": 64}\n')
            p = subprocess.run([TOOL, "verify", web.url, "--against", hub], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            # A right manifest lets verify see a link retargeted or missing in
            # the original...
            link = hub / make_hub_cache.REPO / "snapshots" / make_hub_cache.REVISION / "config.json"
            link.unlink()
            p = subprocess.run([TOOL, "verify", web.url, "--against", hub], capture_output=True, text=True)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            os.symlink("../../refs/main", link)
            p = subprocess.run([TOOL, "verify", web.url, "--against", hub], capture_output=True, text=True)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            link.unlink()
            os.symlink("../../blobs/" + make_hub_cache.CONFIG_BLOB, link)
            # ... and the loss of the config blob, listed as a file.
            (hub / make_hub_cache.REPO / "blobs" / make_hub_cache.CONFIG_BLOB).unlink()
            p = subprocess.run([TOOL, "verify", web.url, "--against", hub], capture_output=True, text=True)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
