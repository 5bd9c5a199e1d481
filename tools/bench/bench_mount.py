"""A ptwmfs mount for the benchmarks (load_bench.py, mount_bench.py): the
daemon in the foreground on a temporary mount point, ready when it writes to
ready_fd, with its mount time, CPU seconds and /proc status at hand, and
always unmounted and reaped on exit, even when it never became ready."""

import os
import select
import subprocess
import sys
import tempfile
import time


class Mounted:
    """ptwmfs in the foreground on a temporary mount point; unmounted on exit."""

    def __init__(self, ptwmfs, store, options, prefix="ptwmfs-bench-"):
        self.ptwmfs, self.store, self.options, self.prefix = ptwmfs, store, options, prefix

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix=self.prefix)
        read_end, write_end = os.pipe()
        opts = ",".join(o for o in (f"auto_unmount,ready_fd={write_end}", self.options) if o)
        start = time.perf_counter()
        self.process = subprocess.Popen([self.ptwmfs, self.store, self.path, "-f", "-o", opts], pass_fds=(write_end,))
        os.close(write_end)
        ready, _, _ = select.select([read_end], [], [], 120)
        ok = ready and os.read(read_end, 1) == b"1"
        self.mount_seconds = time.perf_counter() - start
        os.close(read_end)
        if not ok:
            self.__exit__()
            sys.exit("ptwmfs did not become ready")
        return self

    def cpu_seconds(self):
        with open(f"/proc/{self.process.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def status(self, field):
        with open(f"/proc/{self.process.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        return 0

    def __exit__(self, *exc):
        if os.path.ismount(self.path):
            if subprocess.run(["fusermount3", "-u", self.path]).returncode != 0:
                subprocess.run(["umount", "-l", self.path])
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:  # never became ready, or hangs: leave no daemon behind
            self.process.terminate()
            self.process.wait(timeout=30)
            if os.path.ismount(self.path):
                subprocess.run(["umount", "-l", self.path])
        os.rmdir(self.path)
