"""Mount options and mount points the daemon refuses: each with a message
naming what is wrong and a non-zero exit, before anything is mounted."""
import os
import unittest

from mount_guard import run_not_mounting
from ptwmfs_testlib import Mount, TempDir, executable, make_packed_model


class RefusedOptions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = TempDir()
        _, cls.store = make_packed_model(cls.tmp.__enter__(), scale=1)
        cls.mountpoint = os.path.join(cls.tmp.path, "mnt")
        os.mkdir(cls.mountpoint)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.__exit__(None, None, None)

    def assert_refused(self, mountpoint, options, message):
        args = [executable("PTWMFS"), self.store, mountpoint] + (["-o", options] if options else [])
        result, mounted = run_not_mounting(args, mountpoint)
        self.assertNotEqual(result.returncode, 0, result.stderr)
        self.assertIn(message, result.stderr)
        self.assertFalse(mounted)

    def test_worker_counts_out_of_range(self):
        # A mistyped count must not start a million threads, or fall back
        # to the default without a word. (99999999999 was shown wrapped
        # around, as 1215752191.)
        for workers in ["-1", "5000", "99999999999"]:
            self.assert_refused(self.mountpoint, "workers=" + workers, f"workers takes 0 to 1024, not {workers}")

    def test_numbers_that_are_not_whole_numbers(self):
        # fuse_opt's %d read the digits in front and ignored the rest:
        # workers=2x ran 2 workers, workers=1e3 one.
        for option in ["workers=2x", "workers=1e3", "workers=+3", "workers=", "ready_fd=3 ", "ready_fd=abc"]:
            name, text = option.split("=")
            self.assert_refused(self.mountpoint, option, f"bad {name} '{text}': expected a whole number")

    def test_ready_fd_not_open(self):
        # The byte went nowhere (the failed write only logged) and whoever
        # waited for it waited forever; -5 meant no ready_fd at all.
        for fd in ["-5", "99"]:
            self.assert_refused(self.mountpoint, "ready_fd=" + fd, f"ready_fd={fd}: not an open file descriptor")

    def test_remote_counts_out_of_range(self):
        # (Refused while parsing, before any request: no server needed.)
        for option, message in [("remote_timeout=-1", "remote_timeout must be 1 second or more"),
                                ("remote_timeout=5s", "bad remote_timeout '5s': expected a whole number"),
                                ("fetch_connections=-1", "fetch_connections must be 1 or more"),
                                # A thread and a connection each: 2^31 - 1 were taken.
                                ("fetch_connections=1025",
                                 "fetch_connections must be 1 or more (and at most 1024, a thread each; "
                                 "fetch_ahead=0 turns fetch-ahead off), not 1025"),
                                ("fetch_connections=2147483647", "(and at most 1024, a thread each; "),
                                ("fetch_connections=4x", "bad fetch_connections '4x': expected a whole number"),
                                ("fetch_connections=+4", "bad fetch_connections '+4': expected a whole number"),
                                # Held in memory: 100G had set a 214 GB bound on fetched blocks.
                                ("fetch_ahead=2G", "fetch_ahead takes at most 1G (held in memory while its reader "
                                                   "catches up), not 2G")]:
            args = [executable("PTWMFS"), "s3://bucket/prefix", self.mountpoint, "-o", option]
            result, mounted = run_not_mounting(args, self.mountpoint)
            self.assertNotEqual(result.returncode, 0, option)
            self.assertIn(message, result.stderr)
            self.assertFalse(mounted)

    def test_mount_names(self):
        # The daemon's own fsname won without a word; a subtype went to
        # fusermount3 beside the daemon's (subtype=foo,subtype=ptwmfs).
        for option in ["subtype=foo", "fsname=bar"]:
            self.assert_refused(self.mountpoint, option,
                                f"-o {option}: ptwmfs names its mounts itself (subtype=ptwmfs, fsname=STORE_DIR)")

    def test_remote_options_on_a_local_directory(self):
        # They were ignored, bad values too: fetch_ahead=abc mounted.
        for option in ["fetch_ahead=abc", "disk_cache_size=1G", "region=eu-west-1", "remote_timeout=5"]:
            self.assert_refused(self.mountpoint, option,
                                f"-o {option}: only s3:// and https:// stores take it, not the directory {self.store}")

    def test_s3_options_on_an_https_url(self):
        # An https:// tree is read unsigned: they were ignored. (Refused while
        # parsing, before any request: no server needed.)
        url = "https://127.0.0.1:9/models/"
        for option in ["region=eu-west-1", "profile=prod", "s3_endpoint=http://127.0.0.1:9"]:
            args = [executable("PTWMFS"), url, self.mountpoint, "-o", option]
            result, mounted = run_not_mounting(args, self.mountpoint)
            self.assertNotEqual(result.returncode, 0, result.stderr)
            self.assertIn(f"-o {option}: only s3:// stores take it, not {url}", result.stderr)
            self.assertFalse(mounted)

    def test_unknown_option_before_the_scan(self):
        # Found by libfuse only after the scan: with a remote store whose
        # server is down, the manifest's failed GET (after remote_timeout)
        # was all that was said.
        args = [executable("PTWMFS"), "http://127.0.0.1:9/prefix/", self.mountpoint,
                "-o", "bogus,remote_timeout=30"]
        result, mounted = run_not_mounting(args, self.mountpoint)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("unknown option(s): `-o bogus'", result.stderr)
        self.assertNotIn("ptwmfs-manifest.json", result.stderr)
        self.assertFalse(mounted)

    def test_kernel_readahead_below_a_page(self):
        # The kernel takes whole KiB: 3K would have turned read-ahead off.
        self.assert_refused(self.mountpoint, "kernel_readahead=3K",
                            "kernel_readahead takes 0 (leave the kernel's) or 4K and more, not 3K")

    def test_kernel_readahead_in_part_pages(self):
        # read_ahead_kb keeps whole pages, rounding down: 4097 bytes and 6K
        # were both mounted with 4K, without a word.
        page = os.sysconf("SC_PAGE_SIZE")
        for size in [str(page + 1), f"{page // 1024 + 2}K", f"{page + 512}"]:
            self.assert_refused(self.mountpoint, "kernel_readahead=" + size,
                                f"kernel_readahead takes whole pages, a multiple of {page // 1024}K, not {size} "
                                f"(the kernel would round it down to {page // 1024}K)")

    def test_kernel_readahead_beyond_what_a_file_keeps(self):
        # A file's read-ahead window is a 32-bit count of pages: 2^32 pages
        # (16T with 4K pages) wrapped around to none, and 99999G was taken.
        page = os.sysconf("SC_PAGE_SIZE")
        most = page * (2**32 - 1)
        for size in ["99999G", f"{(most + page) // 1024}K", f"{most + page}"]:
            self.assert_refused(self.mountpoint, "kernel_readahead=" + size,
                                f"kernel_readahead takes at most {most // 1024}K (2^32 - 1 pages of {page // 1024}K: "
                                f"the kernel counts a file's read-ahead in 32 bits, and more wraps around), not {size}")

    def test_kernel_readahead_bounds_are_kept(self):
        # What is accepted is what the kernel keeps, byte for byte: one
        # page, and 2^32 - 1 of them.
        if os.geteuid() != 0:
            self.skipTest("setting a mount's read-ahead needs root")
        page = os.sysconf("SC_PAGE_SIZE")
        for size in [page, page * (2**32 - 1)]:
            with Mount(self.store, f"kernel_readahead={size // 1024}K") as mount:
                os.stat(mount / "model.safetensors")  # the first request after INIT applies it
                device = os.stat(mount.path).st_dev
                with open(f"/sys/class/bdi/{os.major(device)}:{os.minor(device)}/read_ahead_kb") as f:
                    self.assertEqual(int(f.read()), size // 1024)
                self.assertNotIn("kernel_readahead", mount.log())

    def test_read_write(self):
        # mount(8) passes rw unless told ro: an fstab entry without ro must
        # mount, read-only, and say so (it did so without a word).
        for options in ["rw", "ro,rw"]:
            with Mount(self.store, options) as mount:
                self.assertTrue(os.statvfs(mount.path).f_flag & os.ST_RDONLY)
                self.assertIn("-o rw: the file system is read-only; mounting it read-only", mount.log())

    def test_read_only_after_read_write(self):
        with Mount(self.store, "rw,ro") as mount:
            self.assertTrue(os.statvfs(mount.path).f_flag & os.ST_RDONLY)

    def test_a_file_that_is_not_a_store(self):
        # Given alone, a file must be a store: a directory's scan would show
        # it as a plain file, a mount of it alone fails with the reason.
        path = os.path.join(self.tmp.path, "plain.safetensors")
        with open(path, "wb") as f:
            f.write(b"\x08" + bytes(7) + b"{}      " + bytes(240))
        result, mounted = run_not_mounting([executable("PTWMFS"), path, self.mountpoint], self.mountpoint)
        self.assertNotEqual(result.returncode, 0, result.stderr)
        self.assertIn(f"{path}: not a ptwmfs store (wrong magic); it is a safetensors file, which 'ptwmfs-tool pack' "
                      "makes a store of", result.stderr)
        self.assertFalse(mounted)

    def test_mount_point_that_is_a_file(self):
        # The kernel mounts a directory root on a file, and every access
        # then fails with EIO.
        path = os.path.join(self.tmp.path, "a-file")
        open(path, "w").close()
        self.assert_refused(path, "", f"{path}: mount point is not a directory")


def child_command_lines(pid):
    """The argv lists of the processes whose parent is pid."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")[:-1]
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if parent == pid:
            yield [arg.decode(errors="replace") for arg in argv]


class MountCommandLine(unittest.TestCase):
    def test_subtype_given_once(self):
        # libfuse adds a subtype (the program's name) unless one is given
        # before fuse_parse_cmdline; the daemon added its own after it.
        # With auto_unmount (as Mount mounts) fusermount3 stays, a child of
        # the daemon, and its command line shows the options it was given.
        with TempDir() as tmp:
            _, store = make_packed_model(tmp, scale=1)
            with Mount(store) as mount:
                fusermount = [argv for argv in child_command_lines(mount.process.pid)
                              if argv and os.path.basename(argv[0]) == "fusermount3"]
                self.assertEqual(len(fusermount), 1, fusermount)
                argv = fusermount[0]
                if "-o" not in argv:
                    # Newer libfuse mounts with mount(2) itself when root and
                    # starts fusermount3 --auto-unmount without the options.
                    self.skipTest(f"fusermount3 was given no -o to check: {argv}")
                options = argv[argv.index("-o") + 1].split(",")
                self.assertEqual([o for o in options if o.startswith("subtype=")], ["subtype=ptwmfs"], argv)


if __name__ == "__main__":
    unittest.main()
