"""Shared helpers of the real-mount tests: building test data, packing,
mounting ptwmfs (never leaving a mount behind) and reading store layouts.

The paths of the built executables come from the environment:
PTWMFS (the daemon), PTWMFS_TOOL (ptwmfs-tool), PTWMFS_STORE_LAYOUT
(tests/mount/store_layout.cpp) and PTWMFS_SOURCE_ROOT (the repo).
"""
import faulthandler
import hashlib
import json
import mmap
import os
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import threading

SOURCE_ROOT = os.environ.get("PTWMFS_SOURCE_ROOT",
                             os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(SOURCE_ROOT, "tests", "data"))
import make_model  # noqa: E402  (tests/data/make_model.py)
import mount_guard  # noqa: E402  (beside this file)

# A test that hangs is stopped by meson (SIGTERM) without a word of where.
# A minute before meson's timeout (900 s; .ci/sanitizers.sh multiplies it
# and says so here), every thread's Python stack goes to stderr, which
# meson prints with the failure. A daemon threading.Timer, not
# faulthandler.dump_traceback_later: that one's C thread is gone in a
# forked child, whose interpreter shutdown then waits on it forever.
_stacks_timer = threading.Timer(float(os.environ.get("PTWMFS_TEST_STACKS_AFTER", "840")),
                                lambda: faulthandler.dump_traceback(sys.stderr, all_threads=True))
_stacks_timer.daemon = True
_stacks_timer.start()

PAGE = 4096
STATS_XATTR = "user.ptwmfs.stats"


def executable(variable):
    path = os.environ.get(variable)
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError(f"set {variable} to the built executable (meson test does)")
    return path


def corpus_dir():
    """<repo>/../shared/corpus, or None when this checkout has none."""
    path = os.path.normpath(os.path.join(SOURCE_ROOT, "..", "shared", "corpus"))
    return path if os.path.isdir(path) else None


def pack(src, dst, *options):
    subprocess.run([executable("PTWMFS_TOOL"), "pack", *options, src, dst], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_packed_model(workdir, scale=4):
    """A generated model directory and its packed store directory."""
    original = os.path.join(workdir, "model")
    store = os.path.join(workdir, "store")
    make_model.make_model(original, seed=scale, scale=scale)
    pack(original, store)
    return original, store


class Mount:
    """`with Mount(store_dir, "cache_size=1M") as m:` mounts with -f and
    auto_unmount, waits for the ready_fd byte, and on exit unmounts (lazily
    if need be) and reaps the daemon; m.log() is its stderr. preexec_fn
    runs in the daemon's process before it starts (resource limits)."""

    def __init__(self, store_dir, options="", preexec_fn=None):
        self.store_dir = store_dir
        self.options = options
        self.preexec_fn = preexec_fn
        self.path = None
        self.process = None
        self._log_file = None
        self._log_text = ""

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="ptwmfs-mnt-")
        self._log_file = tempfile.TemporaryFile()
        read_end, write_end = os.pipe()
        opts = f"auto_unmount,ready_fd={write_end}" + (f",{self.options}" if self.options else "")
        try:
            self.process = subprocess.Popen([executable("PTWMFS"), self.store_dir, self.path, "-f", "-o", opts],
                                            pass_fds=(write_end,), stdout=self._log_file, stderr=self._log_file,
                                            preexec_fn=self.preexec_fn)
            os.close(write_end)
            write_end = -1
            ready, _, _ = select.select([read_end], [], [], 60)
            if not ready or os.read(read_end, 1) != b"1":
                raise RuntimeError(f"ptwmfs did not become ready:\n{self.log()}")
        except BaseException:
            self._teardown()
            raise
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
        return self

    def __exit__(self, *exc):
        self._teardown()
        return False

    def _teardown(self):
        # mounted(), not os.path.ismount: a stat of the mount point waits on
        # the daemon, forever if it is stuck, and says "not mounted" once it
        # died, which left its dead mount behind.
        if self.path and mount_guard.mounted(self.path):
            mount_guard.unmount(self.path, lazy=False)
        if self.process is not None:
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=60)
        if self.path and not mount_guard.mounted(self.path):
            os.rmdir(self.path)
        if self._log_file is not None:
            self._log_text = self.log()
            self._log_file.close()
            self._log_file = None

    def __truediv__(self, relative):
        return os.path.join(self.path, relative)

    def stats(self):
        return json.loads(os.getxattr(self.path, STATS_XATTR))

    def log(self):
        """The daemon's stderr so far (all of it once unmounted)."""
        if self._log_file is None:
            return self._log_text
        # pread: seeking would move the offset the daemon writes at (one
        # open file), and its next line would land over the first.
        fd = self._log_file.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")


def sha256_read(path, block=1 << 20):
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_mmap(path, private=False):
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return hashlib.sha256().hexdigest()
        flags = mmap.MAP_PRIVATE if private else mmap.MAP_SHARED
        with mmap.mmap(f.fileno(), size, flags=flags, prot=mmap.PROT_READ) as m:
            return hashlib.sha256(m).hexdigest()


def regular_files(root):
    """Relative paths of the regular files under root (symlinks excluded)."""
    found = []
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                found.append(os.path.relpath(path, root))
    return sorted(found)


def safetensors_tensors(path):
    """{name: (dtype, shape, begin, end)} with absolute file offsets."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    header.pop("__metadata__", None)
    data_begin = 8 + length
    return {name: (t["dtype"], tuple(t["shape"]), data_begin + t["data_offsets"][0], data_begin + t["data_offsets"][1])
            for name, t in header.items()}


def store_chunks(store_path):
    """A store's chunk table, sorted by original offset: dicts with
    original_offset, original_length, stored_offset, payload_lengths (per
    plane, back to back from stored_offset), tensor and raw."""
    result = subprocess.run([executable("PTWMFS_STORE_LAYOUT"), store_path], check=True, capture_output=True)
    return json.loads(result.stdout)["chunks"]


def chunks_overlapping(chunks, begin, end):
    return [c for c in chunks if c["original_offset"] < end and begin < c["original_offset"] + c["original_length"]]


class TempDir:
    """A temporary directory removed at exit even when read-only files
    (such as a packed copy of the read-only corpus) are inside."""

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="ptwmfs-test-")
        return self.path

    def __exit__(self, *exc):
        for dirpath, dirnames, _ in os.walk(self.path):
            for name in dirnames:
                path = os.path.join(dirpath, name)
                if not os.path.islink(path):
                    os.chmod(path, 0o755)
        os.chmod(self.path, 0o755)
        shutil.rmtree(self.path)
        return False

