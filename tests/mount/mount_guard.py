"""For tests that start ptwmfs themselves to see it refuse to mount (not
through ptwmfs_testlib.Mount): run it bounded in time and leave no mount
behind, whatever it did.

Whether a path is mounted on is read from /proc/self/mounts, never by
asking the path: a stat of a FUSE mount point (os.path.ismount) waits on
its daemon, forever if the daemon is alive but stuck.
"""
import os
import re
import subprocess


def mounted(path):
    """Whether a file system is mounted at `path`. Its directory's symlinks
    are resolved, as /proc/self/mounts shows them (a TMPDIR under a link);
    the path itself is not, which would stat it."""
    path = os.path.abspath(path)
    path = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    with open("/proc/self/mounts") as f:
        # Mount points are octal-escaped there: \040 for a space.
        return any(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[1]) == path
                   for line in f)


def unmount(path, lazy=True):
    """Detaches the FUSE file system at `path`, bounded in time: fusermount3
    -u (-z: lazily, a busy one too, unless `lazy` is false, which lets a
    teardown see its daemon exit on a clean unmount), and where that fails
    umount -l. Returns which of the two did it."""
    first = ["fusermount3", "-u"] + (["-z"] if lazy else [])
    if subprocess.run(first + [path], stderr=subprocess.DEVNULL, timeout=60).returncode == 0:
        return " ".join(first)
    subprocess.run(["umount", "-l", path], stderr=subprocess.DEVNULL, timeout=60)
    return "umount -l"


def run_not_mounting(args, mountpoint, timeout=60, **kwargs):
    """subprocess.run(args) (output captured as text) of a ptwmfs that should
    not mount at `mountpoint`. Returns (result, whether it mounted after
    all); in every case, a timeout (raised) too, nothing is left mounted
    there: a daemon that mounted in the foreground and was killed at the
    timeout leaves its mount behind, one that detached keeps running."""
    try:
        result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)
    finally:
        was_mounted = mounted(mountpoint)
        if was_mounted:
            unmount(mountpoint)
    return result, was_mounted
