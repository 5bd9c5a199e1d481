#!/usr/bin/env python3
"""ptwmfs-tool from the command line: directory mirroring, byte-exact round
trips, exit codes, and errors that name the file and what is wrong."""
import fcntl
import hashlib
import json
import os
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
from interrupted_run import run_interrupted, write_large_bf16  # noqa: E402
from verify_result import assert_one_failure  # noqa: E402

TOOL = os.environ.get("PTWMFS_TOOL", "build/tools/ptwmfs-tool/ptwmfs-tool")
CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
import make_hub_cache  # noqa: E402


def run(*args, check=True):
    p = subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"{args} failed ({p.returncode}): {p.stderr}")
    return p


def safetensors(tensors, metadata=None):
    """tensors: list of (name, dtype, shape, bytes)."""
    header, at = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(data)]}
        at += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors)


def current_umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def sanitized_tool():
    """Whether TOOL is a sanitizer build: ASan and TSan runtimes are shared
    objects it links (the release tool links libstdc++ statically)."""
    image = Path(TOOL).read_bytes()
    return b"libasan.so" in image or b"libtsan.so" in image


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class ToolTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="ptwm-cli-"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def model_dir(self):
        src = self.tmp / "model"
        (src / "sub").mkdir(parents=True)
        weights = bytes((i * 7919) % 251 for i in range(200000))
        (src / "model.safetensors").write_bytes(
            safetensors([("a", "BF16", [50000], weights[:100000]), ("b", "F32", [25000], weights[100000:])],
                        {"format": "pt"}))
        (src / "config.json").write_text('{"hidden_size": 64}\n')
        (src / "sub" / "blob").write_bytes(safetensors([("x", "U8", [3], b"\x01\x02\x03")]))  # no extension
        os.symlink("../model.safetensors", src / "sub" / "link.safetensors")
        return src

    @unittest.skipUnless(shutil.which("strace"), "strace is not installed (tools/install-deps.sh installs it): "
                         "the calls that put a tree on the disk are not checked")
    def test_a_new_tree_is_synced_whole_before_it_gets_its_name(self):
        # A staged tree is seen only once it is renamed into place, so its
        # files need not be synced one by one (a journal commit each: 0.8 s
        # for 201 small files): one syncfs, before that rename, puts them all
        # on the disk. Written into a DST that exists, each file is seen as
        # soon as it is renamed, so each is synced before.
        src = self.model_dir()
        for i in range(10):
            (src / f"tok{i}.json").write_text(f'{{"i": {i}}}\n')
        files = sum(1 for p in src.rglob("*") if p.is_file() and not p.is_symlink())

        # (LeakSanitizer stops the process's threads with ptrace at exit,
        # which a traced process cannot: it aborts. The calls are the same.)
        env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")

        def traced(*args):
            trace = self.tmp / "trace"
            subprocess.run(["strace", "-f", "-qq", "-e", "trace=fsync,fdatasync,syncfs,rename,renameat,renameat2",
                            "-o", trace, TOOL, *map(str, args)], check=True, capture_output=True, env=env)
            calls = [line.split(None, 1)[1] for line in trace.read_text().splitlines() if "resumed" not in line]
            return [c for c in calls if not c.startswith("+++")]

        for command, dst in (("pack", self.tmp / "packed"), ("unpack", self.tmp / "unpacked")):
            calls = traced(command, "-q", src if command == "pack" else self.tmp / "packed", dst)
            syncs = [i for i, c in enumerate(calls) if c.startswith("syncfs(")]
            into_place = [i for i, c in enumerate(calls) if c.startswith("rename") and f'"{dst}"' in c]
            self.assertEqual(len(syncs), 1, f"{command}: {calls}")
            self.assertEqual(len(into_place), 1, f"{command}: {calls}")
            self.assertLess(syncs[0], into_place[0], f"{command}: the tree was named before it was synced: {calls}")
            self.assertEqual([c for c in calls if c.startswith(("fsync(", "fdatasync("))], [], command)
        self.assertEqual(subprocess.run(["diff", "-r", src, self.tmp / "unpacked"]).returncode, 0)
        calls = traced("pack", "-q", src, self.tmp / "packed")  # in place now
        self.assertEqual(sum(c.startswith("fsync(") for c in calls), files, calls)
        self.assertFalse(any(c.startswith("syncfs(") for c in calls), calls)

    def test_directory_round_trip_keeps_every_file_and_link(self):
        src = self.model_dir()
        out = run("pack", "-j2", src, self.tmp / "packed").stdout
        self.assertIn("ratio", out)
        packed = self.tmp / "packed"
        self.assertTrue((packed / "model.safetensors.ptwm").is_file())
        self.assertTrue((packed / "sub" / "blob.ptwm").is_file(), "safetensors found by content, not by name")
        self.assertEqual((packed / "config.json").read_text(), '{"hidden_size": 64}\n')
        self.assertEqual(os.readlink(packed / "sub" / "link.safetensors"), "../model.safetensors")
        run("unpack", packed, self.tmp / "back")
        back = self.tmp / "back"
        for rel in ["model.safetensors", "config.json", "sub/blob"]:
            self.assertEqual(sha256(back / rel), sha256(src / rel), rel)
        self.assertEqual(os.readlink(back / "sub" / "link.safetensors"), "../model.safetensors")
        self.assertEqual(run("verify", packed, "--against", src).returncode, 0)

    def test_hub_cache_keeps_refs_no_exist_blob_names_and_links(self):
        # A Hugging Face cache as huggingface_hub writes it: blobs named by
        # ETag (no extension), snapshots of relative links (one a level
        # deeper), refs, empty .no_exist markers and .locks, a version.txt.
        hub = self.tmp / "hf_home" / "hub"
        repo = hub / "models--org--name"
        weights = safetensors([("w", "BF16", [4096], bytes((i * 31) % 256 for i in range(8192)))], {"format": "pt"})
        blobs = {"model.safetensors": hashlib.sha256(weights).hexdigest(),
                 "config.json": "5" * 40, "1_Pooling/config.json": "a" * 40}
        contents = {"model.safetensors": weights, "config.json": b'{"a": 1}', "1_Pooling/config.json": b"{}"}
        rev = "0123456789abcdef0123456789abcdef01234567"
        (repo / "blobs").mkdir(parents=True)
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(rev)
        for name, blob in blobs.items():
            (repo / "blobs" / blob).write_bytes(contents[name])
            link = repo / "snapshots" / rev / name
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.path.relpath(repo / "blobs" / blob, link.parent), link)
        (repo / ".no_exist" / rev).mkdir(parents=True)
        (repo / ".no_exist" / rev / "added_tokens.json").write_bytes(b"")
        (hub / ".locks" / "models--org--name").mkdir(parents=True)
        (hub / ".locks" / "models--org--name" / (blobs["model.safetensors"] + ".lock")).write_bytes(b"")
        (hub / "version.txt").write_text("1")

        packed = self.tmp / "packed"
        run("pack", self.tmp / "hf_home", packed)
        prepo = packed / "hub" / "models--org--name"
        sha = blobs["model.safetensors"]
        self.assertTrue((prepo / "blobs" / (sha + ".ptwm")).is_file(), "the safetensors blob is found by content")
        self.assertFalse((prepo / "blobs" / sha).exists())
        self.assertEqual((prepo / "blobs" / ("5" * 40)).read_bytes(), b'{"a": 1}')
        self.assertEqual((prepo / "refs" / "main").read_text(), rev)
        self.assertEqual((prepo / ".no_exist" / rev / "added_tokens.json").read_bytes(), b"")
        self.assertEqual((packed / "hub" / ".locks" / "models--org--name" / (sha + ".lock")).read_bytes(), b"")
        self.assertEqual((packed / "hub" / "version.txt").read_text(), "1")
        self.assertEqual(os.readlink(prepo / "snapshots" / rev / "model.safetensors"), "../../blobs/" + sha)
        self.assertEqual(os.readlink(prepo / "snapshots" / rev / "1_Pooling" / "config.json"),
                         "../../../blobs/" + "a" * 40)

        run("unpack", packed, self.tmp / "back")
        def listing(root):  # noqa: E306
            out = {}
            for dirpath, dirnames, filenames in os.walk(root):
                for name in dirnames + filenames:
                    p = Path(dirpath) / name
                    out[str(p.relative_to(root))] = (os.readlink(p) if p.is_symlink() else
                                                     "dir" if p.is_dir() else sha256(p))
            return out
        self.assertEqual(listing(self.tmp / "back"), listing(self.tmp / "hf_home"))
        self.assertEqual(run("verify", packed, "--against", self.tmp / "hf_home").returncode, 0)

    def test_manifest_lists_a_link_under_its_own_path(self):
        src = self.model_dir()
        os.symlink("../config.json", src / "sub" / "config.json")  # its target is in the packed tree too
        run("pack", "--manifest", "-q", src, self.tmp / "packed")
        entries = json.loads((self.tmp / "packed" / "ptwmfs-manifest.json").read_text())["entries"]
        links = {e["path"]: e["target"] for e in entries if e["kind"] == "link"}
        self.assertEqual(links, {"sub/config.json": "../config.json", "sub/link.safetensors": "../model.safetensors"},
                         "a link is listed under its own path, not its target's")

    def test_verify_against_a_tree_packed_with_its_manifest(self):
        # The manifest is the packer's: no original has it, but it must list the tree.
        src = self.model_dir()
        packed = self.tmp / "packed"
        run("pack", "--manifest", "-q", src, packed)
        p = run("verify", packed, "--against", src, check=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn(f"OK {packed}/ptwmfs-manifest.json", p.stdout)

        (packed / "config.json").write_text('{"hidden_size": 128}\n')  # changed after the manifest was written
        shutil.copy(packed / "config.json", src / "config.json")
        p = run("verify", packed, "--against", src, check=False)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn(f"FAILED {packed}/ptwmfs-manifest.json: lists 'config.json' as file mode 0644, 20 bytes, "
                      "the tree has file mode 0644, 21 bytes", p.stdout)
        self.assertEqual(p.stdout.count("FAILED"), 1, p.stdout)

        (packed / "ptwmfs-manifest.json").write_text("{not json")
        p = run("verify", packed, check=False)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn(f"FAILED {packed}/ptwmfs-manifest.json: not a ptwmfs manifest", p.stdout)

    def test_verify_against_compares_symlinks(self):
        src = self.model_dir()
        packed = self.tmp / "packed"
        run("pack", "-q", src, packed)
        link, copy = src / "sub" / "link.safetensors", packed / "sub" / "link.safetensors"

        def fails_with(message):
            assert_one_failure(self, TOOL, packed, src, message)

        os.remove(link)
        os.symlink("../config.json", link)
        fails_with(f"{copy}: links to '../model.safetensors', {link} to '../config.json'")
        os.remove(link)
        fails_with(f"{copy}: a symlink to '../model.safetensors', but {link} does not exist")
        link.write_bytes((src / "model.safetensors").read_bytes())
        fails_with(f"{copy}: a symlink to '../model.safetensors', but {link} is not a symlink")
        os.remove(link)
        os.symlink("../model.safetensors", link)
        os.remove(copy)
        fails_with(f"{link}: has no counterpart in {packed}")
        # A plain file where the original is a link: not compared through the link.
        shutil.copy(src / "model.safetensors", copy)
        fails_with(f"{link}: a symlink, but {copy} is not")
        os.remove(copy)
        os.symlink("../model.safetensors", copy)
        self.assertEqual(run("verify", packed, "--against", src).returncode, 0)

    def test_verify_a_tree_against_a_file_is_one_error(self):
        src = self.model_dir()
        packed = self.tmp / "packed"
        run("pack", "-q", src, packed)
        for against, what in [(src / "config.json", f"is a file, {packed} is a directory"),
                              (self.tmp / "nowhere", "no such file or directory")]:
            p = run("verify", packed, "--against", against, check=False)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertEqual(p.stdout, "", "one error, not one per entry")
            self.assertEqual(p.stderr, f"ptwmfs-tool verify: error: --against {against}: {what}\n")

    def test_single_file_into_a_directory_and_back(self):
        src = self.model_dir() / "model.safetensors"
        (self.tmp / "d").mkdir()
        run("pack", "--level", "1", src, self.tmp / "d")
        store = self.tmp / "d" / "model.safetensors.ptwm"
        self.assertTrue(store.is_file())
        run("unpack", "-j1", store, self.tmp / "copy.safetensors")
        self.assertEqual(sha256(self.tmp / "copy.safetensors"), sha256(src))

    def test_inspect_reports_planes_codecs_and_bounds(self):
        src = self.model_dir() / "model.safetensors"
        run("pack", src, self.tmp / "m.ptwm")
        doc = json.loads(run("inspect", "--json", "--chunks", self.tmp / "m.ptwm").stdout)
        self.assertEqual(doc["original_bytes"], src.stat().st_size)
        names = [t["name"] for t in doc["tensors"]]
        self.assertEqual(names, ["a", "b"])
        self.assertEqual(doc["tensors"][0]["decomposition"], "bf16-exponent")
        self.assertEqual(len(doc["tensors"][1]["planes"]), 4)
        self.assertGreater(len(doc["chunks"]), 0)
        table = run("inspect", self.tmp / "m.ptwm").stdout
        self.assertIn("order-0 per-plane bound", table)

    def test_inspect_reports_fp4_blocks_and_scales_apart(self):
        # 64 MXFP4 blocks of 16 bytes and their 64 E8M0 scales, paired by name.
        blocks = bytes((i * 37 + i // 16) % 256 for i in range(64 * 16))
        scales = bytes(120 + (i % 8) // 3 for i in range(64))
        src = self.tmp / "fp4.safetensors"
        src.write_bytes(safetensors([("w.blocks", "U8", [64, 16], blocks), ("w.scales", "U8", [64], scales)]))
        run("pack", src, self.tmp / "fp4.ptwm")
        doc = json.loads(run("inspect", "--json", self.tmp / "fp4.ptwm").stdout)
        roles = {t["name"]: t.get("role") for t in doc["tensors"]}
        self.assertEqual(roles, {"w.blocks": "fp4-blocks", "w.scales": "block-scales"})
        self.assertEqual(doc["block_scales"]["tensors"], 1)
        self.assertEqual(doc["block_scales"]["original_bytes"], 64)
        self.assertEqual(doc["fp4_blocks"]["original_bytes"], 64 * 16)
        self.assertLess(doc["block_scales"]["ratio"], 1)
        table = run("inspect", self.tmp / "fp4.ptwm").stdout
        self.assertIn("block scales", table)
        self.assertIn("fp4 blocks", table)
        run("unpack", self.tmp / "fp4.ptwm", self.tmp / "back.safetensors")
        self.assertEqual(sha256(self.tmp / "back.safetensors"), sha256(src))

    def test_inspect_names_each_pair_from_both_ends(self):
        # A ModelOpt module holds three scale-named tensors beside its FP4
        # weight (weight_scale, weight_scale_2, input_scale), and one scale
        # tensor may serve two FP4 tensors (`x` and `x.blocks` both name
        # `x.scales`): a role alone does not say which tensor the values
        # were coded under. A 16-byte FP4 tensor is coded as plain bytes
        # and shows no grouped decomposition, yet is paired.
        blocks = bytes((i * 37 + i // 16) % 256 for i in range(64 * 16))
        e8m0 = bytes(120 + (i % 8) // 3 for i in range(64))
        e4m3 = bytes(0x30 + i % 5 for i in range(128))
        src = self.tmp / "pairs.safetensors"
        src.write_bytes(safetensors([
            ("m.weight", "U8", [64, 16], blocks), ("m.weight_scale", "F8_E4M3", [128], e4m3),
            ("m.weight_scale_2", "F32", [], struct.pack("<f", 0.5)), ("m.input_scale", "F32", [], struct.pack("<f", 2.0)),
            ("x.blocks", "U8", [64, 16], blocks), ("x", "U8", [64, 16], blocks[::-1]), ("x.scales", "U8", [64], e8m0),
            ("s.blocks", "U8", [1, 16], blocks[:16]), ("s.scales", "U8", [1], e8m0[:1])]))
        store = self.tmp / "pairs.ptwm"
        run("pack", "-q", src, store)
        doc = json.loads(run("inspect", "--json", store).stdout)
        by_name = {t["name"]: t for t in doc["tensors"]}
        self.assertEqual(by_name["m.weight"]["scale_tensor"], "m.weight_scale")
        self.assertEqual(by_name["m.weight_scale"]["scales_of"], ["m.weight"])
        self.assertEqual(by_name["x.blocks"]["scale_tensor"], "x.scales")
        self.assertEqual(by_name["x"]["scale_tensor"], "x.scales")
        self.assertEqual(sorted(by_name["x.scales"]["scales_of"]), ["x", "x.blocks"])
        self.assertEqual(by_name["s.blocks"]["scale_tensor"], "s.scales")
        for unpaired in ("m.weight_scale_2", "m.input_scale"):
            self.assertNotIn("scale_tensor", by_name[unpaired])
            self.assertNotIn("scales_of", by_name[unpaired])
        rows = run("inspect", store).stdout.split("\n\n")[0].splitlines()
        self.assertTrue(rows[0].rstrip().endswith("pair"), rows[0])
        row = {r.split()[0]: r for r in rows[1:] if r and not r.startswith(" ")}
        self.assertTrue(row["m.weight"].endswith("  scales m.weight_scale"), row["m.weight"])
        self.assertTrue(row["m.weight_scale"].endswith("  scales of m.weight"), row["m.weight_scale"])
        self.assertTrue(row["s.blocks"].endswith("  scales s.scales"), row["s.blocks"])
        self.assertRegex(row["x.scales"], r"  scales of (x, x\.blocks|x\.blocks, x)$")
        self.assertNotIn("scales", row["m.weight_scale_2"].split("F32")[1])

    def test_inspect_table_shows_long_names_whole_and_aligned(self):
        # Real checkpoints' names run past 40 characters and differ at their
        # ends: ModelOpt's X.weight_scale and X.weight_scale_2, a UTF-8 name
        # beside them. Every name is shown whole, and the columns after it
        # line up.
        stem = "model.language_model.layers.27.mlp.experts.down_proj"
        names = [f"{stem}.weight_scale", f"{stem}.weight_scale_2", "b\u00e9ta"]
        src = self.tmp / "long.safetensors"
        src.write_bytes(safetensors([(n, "U8", [4], bytes([i, 1, 2, 3])) for i, n in enumerate(names)]))
        store = self.tmp / "long.ptwm"
        run("pack", "-q", src, store)
        rows = run("inspect", store).stdout.split("\n\n")[0].splitlines()
        self.assertTrue(rows[0].startswith("tensor "), rows[0])
        column = rows[0].index(" dtype") + 1
        for name in names:
            row = next((r for r in rows if r.startswith(name + " ")), None)
            self.assertIsNotNone(row, f"{name!r} shown whole:\n" + "\n".join(rows))
            self.assertEqual(row.index(" U8") + 1, column, f"{name!r}'s dtype under the header's:\n" + "\n".join(rows))

    def test_verify_lists_a_damaged_chunk_and_fails(self):
        src = self.model_dir() / "model.safetensors"
        store = self.tmp / "m.ptwm"
        run("pack", src, store)
        chunk = json.loads(run("inspect", "--json", "--chunks", store).stdout)["chunks"][0]
        data = bytearray(store.read_bytes())
        data[chunk["stored_offset"] + chunk["stored_length"] // 2] ^= 0x55
        store.write_bytes(bytes(data))
        p = run("verify", store, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("DAMAGED", p.stdout)
        self.assertIn("chunk 0", p.stdout)
        self.assertIn("tensor 'a'", p.stdout)
        p = run("unpack", store, self.tmp / "out", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertFalse((self.tmp / "out").exists(), "no partial output after a failed unpack")

    def test_unpack_to_standard_output(self):
        model = self.model_dir()
        src = model / "model.safetensors"
        store = self.tmp / "m.ptwm"
        run("pack", "-q", src, store)
        p = subprocess.run([TOOL, "unpack", "-j2", store, "-"], capture_output=True, cwd=self.tmp)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, src.read_bytes(), "the original's bytes, and nothing else, on stdout")
        self.assertIn(b"unpacked", p.stderr, "the summary on stderr")
        self.assertFalse((self.tmp / "-").exists(), "no file named '-'")
        run("pack", "-q", model, self.tmp / "tree")
        p = run("unpack", self.tmp / "tree", "-", check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("'-' (standard output) takes one store, not the tree", p.stderr)
        # A damaged chunk ends the stream with an error, not with wrong bytes.
        chunks = json.loads(run("inspect", "--json", "--chunks", store).stdout)["chunks"]
        data = bytearray(store.read_bytes())
        data[chunks[-1]["stored_offset"] + chunks[-1]["stored_length"] // 2] ^= 0x55
        store.write_bytes(bytes(data))
        p = subprocess.run([TOOL, "unpack", store, "-"], capture_output=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"chunk {len(chunks) - 1} (tensor 'b', original offset {chunks[-1]['original_offset']})".encode(),
                      p.stderr)
        self.assertLessEqual(len(p.stdout), chunks[-1]["original_offset"])
        self.assertEqual(p.stdout, src.read_bytes()[:len(p.stdout)])

    def test_verify_names_each_chunk_a_damaged_scale_chunk_takes_down_once(self):
        # 4096 MXFP4 blocks (64 KiB, four 16 KiB chunks) under one chunk of
        # scales: damage in the scales loses every block chunk too. Each is
        # listed once, by its own name, beside the scale chunk.
        blocks = bytes((i * 37 + i // 16) % 256 for i in range(4096 * 16))
        scales = bytes(120 + (i % 8) // 3 for i in range(4096))
        src = self.tmp / "fp4.safetensors"
        src.write_bytes(safetensors([("w.blocks", "U8", [4096, 16], blocks), ("w.scales", "U8", [4096], scales)]))
        store = self.tmp / "fp4.ptwm"
        run("pack", "-q", "--chunk-size", "16K", src, store)
        chunks = json.loads(run("inspect", "--json", "--chunks", store).stdout)["chunks"]
        scale_chunk = next(c for c in chunks if c["tensor"] == "w.scales")
        block_chunks = [c for c in chunks if c["tensor"] == "w.blocks"]
        self.assertGreater(len(block_chunks), 1)
        data = bytearray(store.read_bytes())
        data[scale_chunk["stored_offset"] + scale_chunk["stored_length"] // 2] ^= 0x10
        store.write_bytes(bytes(data))
        p = run("verify", "-j1", store, check=False)
        self.assertEqual(p.returncode, 1)
        damaged = [line for line in p.stdout.splitlines() if line.startswith("DAMAGED")]
        self.assertEqual(len(damaged), len(block_chunks) + 1, p.stdout)
        for c in block_chunks + [scale_chunk]:
            named = [line for line in damaged if f"chunk {c['index']} (tensor '{c['tensor']}'" in line.split(": ")[0]]
            self.assertEqual(len(named), 1, f"chunk {c['index']}:\n{p.stdout}")
        self.assertIn(f"{len(block_chunks) + 1} of {len(chunks)} chunks damaged", p.stdout)

    def test_names_up_to_the_file_systems_limit(self):
        # A name of up to 255 bytes is legal; its hidden temporary file's
        # ("." NAME ".tmp.XXXXXX") must not need more.
        src = self.tmp / "long"
        src.mkdir()
        plain = "c" * 250 + ".json"
        weights = "m" * 238 + ".safetensors"  # its store's name: 255 bytes
        (src / plain).write_text("{}")
        shutil.copy(self.small_model(), src / weights)
        run("pack", "-q", src, self.tmp / "packed")
        self.assertTrue((self.tmp / "packed" / (weights + ".ptwm")).is_file())
        run("unpack", "-q", self.tmp / "packed", self.tmp / "back")
        for name in (plain, weights):
            self.assertEqual((self.tmp / "back" / name).read_bytes(), (src / name).read_bytes(), name)
        # One byte more and the store's name cannot exist: said of the source.
        too_long = self.tmp / ("z" * 239 + ".safetensors")
        shutil.copy(self.small_model(), too_long)
        p = run("pack", too_long, self.tmp, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"{too_long}: its store's name would be 256 bytes, more than a file name may have (255)",
                      p.stderr)

    def test_bad_input_is_named_and_leaves_nothing(self):
        cases = {
            "notst.safetensors": (b"hello world, not safetensors", "not a safetensors file"),
            "trunc.safetensors": (safetensors([("a", "F32", [4], bytes(16))])[:-3], "past the end of the file"),
            "dtype.safetensors": (safetensors([("a", "F12", [4], bytes(16))]), "unknown dtype \"F12\""),
        }
        for name, (content, message) in cases.items():
            path = self.tmp / name
            path.write_bytes(content)
            p = run("pack", path, self.tmp / "out.ptwm", check=False)
            self.assertEqual(p.returncode, 1, name)
            self.assertIn(name, p.stderr)
            self.assertIn(message, p.stderr)
            self.assertFalse((self.tmp / "out.ptwm").exists())
            self.assertEqual([f for f in os.listdir(self.tmp) if f.startswith(".")], [], "temporary left behind")

    def test_store_errors_name_the_store(self):
        bad = self.tmp / "x.ptwm"
        bad.write_bytes(b"NOTASTORE" + bytes(200))
        p = run("verify", bad, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("x.ptwm: not a ptwmfs store (wrong magic)", p.stdout)
        p = run("inspect", bad, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("wrong magic", p.stderr)

    def test_bad_file_in_a_directory_fails_or_is_copied_by_option(self):
        src = self.model_dir()
        (src / "broken.safetensors").write_bytes(safetensors([("a", "F32", [4], bytes(16))])[:-1])
        p = run("pack", src, self.tmp / "p1", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("broken.safetensors", p.stderr)
        # A new DST appears whole or not at all: no half-packed tree, no
        # staging directory beside it.
        self.assertFalse((self.tmp / "p1").exists(), "a failed pack left a partial tree")
        self.assertEqual([n for n in os.listdir(self.tmp) if n.startswith(".")], [])
        p = run("pack", "--on-bad", "copy", src, self.tmp / "p2")
        self.assertIn("warning", p.stderr)
        self.assertEqual(sha256(self.tmp / "p2" / "broken.safetensors"), sha256(src / "broken.safetensors"))
        # The same for unpack: a damaged store fails it, and nothing is left.
        store = next((self.tmp / "p2").glob("*.ptwm"))
        os.chmod(store, 0o644)
        data = bytearray(store.read_bytes())
        data[len(data) // 2] ^= 0x55
        store.write_bytes(bytes(data))
        p = run("unpack", self.tmp / "p2", self.tmp / "u1", check=False)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertFalse((self.tmp / "u1").exists(), "a failed unpack left a partial tree")
        self.assertEqual([n for n in os.listdir(self.tmp) if n.startswith(".")], [])
        self.assertEqual(stat.S_IMODE(os.stat(self.tmp / "p2").st_mode), 0o777 & ~current_umask())

    def test_a_bad_shard_is_refused_before_any_other_is_packed(self):
        # A checkpoint whose last shard was cut short (an interrupted
        # download) must be refused at once, not after its other shards,
        # gigabytes of them at scale, were packed and thrown away.
        src = self.tmp / "ckpt"
        src.mkdir()
        weights = bytes((i * 7919) % 251 for i in range(1 << 20))
        (src / "model-00001-of-00002.safetensors").write_bytes(safetensors([("a", "BF16", [1 << 19], weights)]))
        (src / "model-00002-of-00002.safetensors").write_bytes(safetensors([("b", "BF16", [1 << 19], weights)])[:-1])
        p = run("pack", src, self.tmp / "out", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("model-00002-of-00002.safetensors", p.stderr)
        self.assertIn("past the end of the file", p.stderr)
        self.assertIn("--on-bad copy", p.stderr, "the way round it is not said")
        self.assertEqual(p.stdout, "", "the good shard was packed before the bad one was refused")
        self.assertFalse((self.tmp / "out").exists())
        self.assertEqual([n for n in os.listdir(self.tmp) if n.startswith(".")], [])
        # --on-bad copy still packs the good shard and copies the bad one.
        p = run("pack", "--on-bad", "copy", src, self.tmp / "out")
        self.assertIn("copying unchanged", p.stderr)
        self.assertTrue((self.tmp / "out" / "model-00001-of-00002.safetensors.ptwm").exists())

    def test_a_link_in_a_packed_cache_names_its_blobs_store(self):
        # snapshots/REV/model.safetensors links to ../../blobs/ETAG, which
        # pack stored as blobs/ETAG.ptwm: inspect, verify and unpack of the
        # link said only "cannot open: No such file or directory".
        hub = self.tmp / "hub"
        make_hub_cache.make_hub_cache(str(hub))
        run("pack", hub, self.tmp / "packed")
        link = self.tmp / "packed" / make_hub_cache.REPO / "snapshots" / make_hub_cache.REVISION / "model.safetensors"
        self.assertTrue(link.is_symlink() and not link.exists())
        self.assertIn("ratio", run("inspect", link).stdout)
        self.assertIn("OK", run("verify", link, "--against", hub / make_hub_cache.REPO / "blobs" /
                                make_hub_cache.WEIGHTS_BLOB).stdout)
        run("unpack", link, self.tmp / "model.safetensors")
        self.assertEqual((self.tmp / "model.safetensors").read_bytes(),
                         (hub / make_hub_cache.REPO / "blobs" / make_hub_cache.WEIGHTS_BLOB).read_bytes())

    def test_unpacking_a_tree_with_no_store_says_so(self):
        # An original model directory given by mistake was copied, and all
        # unpack said was "unpacked 0 B".
        src = self.model_dir()
        p = run("unpack", src, self.tmp / "copy")
        self.assertIn("holds no store", p.stderr)
        p = run("pack", src, self.tmp / "packed")
        self.assertNotIn("holds no store", run("unpack", self.tmp / "packed", self.tmp / "back").stderr)

    def test_a_hub_caches_partial_download_is_copied_as_it_is(self):
        # huggingface_hub fetches a blob into blobs/ETAG.incomplete and
        # resumes it there: a cut-short safetensors file, which failed the
        # pack of the whole cache. It is no whole file yet: copied as it is.
        hub = self.tmp / "hub"
        make_hub_cache.make_hub_cache(str(hub))
        blobs = hub / make_hub_cache.REPO / "blobs"
        partial = blobs / ("9" * 64 + ".incomplete")
        partial.write_bytes((blobs / make_hub_cache.WEIGHTS_BLOB).read_bytes()[:-1000])
        run("pack", hub, self.tmp / "packed")
        copied = self.tmp / "packed" / make_hub_cache.REPO / "blobs" / partial.name
        self.assertEqual(copied.read_bytes(), partial.read_bytes())
        self.assertFalse(Path(str(copied) + ".ptwm").exists())

    def test_repack_over_a_store_of_a_file_no_longer_safetensors_leaves_no_stale_store(self):
        # Packed once as safetensors (found by content), then replaced by
        # another format and packed again into the same DST: the old store
        # would hide the new copy (the mount and unpack show NAME.ptwm over
        # NAME), serving the old weights.
        src = self.model_dir()
        run("pack", src, self.tmp / "packed")
        self.assertTrue((self.tmp / "packed" / "sub" / "blob.ptwm").is_file())
        (src / "sub" / "blob").write_bytes(b"PK\x03\x04 a zip checkpoint now")
        run("pack", src, self.tmp / "packed")
        self.assertEqual(sha256(self.tmp / "packed" / "sub" / "blob"), sha256(src / "sub" / "blob"))
        self.assertFalse((self.tmp / "packed" / "sub" / "blob.ptwm").exists(), "a stale store hides the new file")
        run("unpack", self.tmp / "packed", self.tmp / "back")
        self.assertEqual(sha256(self.tmp / "back" / "sub" / "blob"), sha256(src / "sub" / "blob"))
        self.assertEqual(run("verify", self.tmp / "packed", "--against", src).returncode, 0)

    def test_usage_errors_exit_2_and_help_exits_0(self):
        self.assertEqual(run("pack", check=False).returncode, 2)
        self.assertEqual(run("pack", "--level", "12", "a", "b", check=False).returncode, 2)
        # Upload options with a local DST did nothing, silently.
        p = run("pack", "--parallel", "2", "a", "b", check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--parallel is for an s3:// DST, and b is local", p.stderr)
        for cmd in ["pack", "unpack", "verify"]:
            # 2^32 + 1 must not wrap to one thread, nor 100000 start that many.
            for threads in ["100000", "4294967297"]:
                result = run(cmd, "-j", threads, "a", "b", check=False)
                self.assertEqual(result.returncode, 2)
                self.assertIn(f"--threads takes 0 (all cores) to 1024, not {threads}", result.stderr)
        self.assertEqual(run("frobnicate", check=False).returncode, 2)
        for cmd in ["pack", "unpack", "verify", "inspect"]:
            self.assertIn("usage: ptwmfs-tool " + cmd, run(cmd, "--help").stdout)
        self.assertIn("ptwmfs-tool", run("--version").stdout)

    def test_common_mistakes_are_named_and_write_nothing(self):
        src = self.small_model()
        store = self.tmp / "small.safetensors.ptwm"
        run("pack", src, store)
        before = sorted(os.listdir(self.tmp))
        mistakes = [  # (arguments, exit status, what the message must say)
            (["pack", "--manifest", src, self.tmp / "x.ptwm"], 1, "so DST must be a directory"),
            (["pack", src, str(self.tmp / "newdir") + "/"], 1, "newdir/: no such directory"),
            (["unpack", store, str(self.tmp / "newdir") + "/"], 1, "newdir/: no such directory"),
            (["pack", store, self.tmp / "again.ptwm"], 1, "small.safetensors.ptwm: a ptwmfs store already"),
            (["inspect", self.tmp], 1, "a directory; inspect reads one store"),
            (["pack", "--parallel", "0", src, self.tmp / "p.ptwm"], 2, "--parallel takes 1 to 256, not 0"),
            (["pack", "--chunk-size", "1x", src, self.tmp / "p.ptwm"], 2, "--chunk-size takes 4K to 256M, not '1x'"),
            (["pack", "--region", "eu-west-1", src, self.tmp / "p.ptwm"], 2, "--region is for s3:// and https:// URLs"),
            (["unpack", "--profile", "p", store, self.tmp / "u"], 2, "--profile is for s3:// and https:// URLs"),
            (["verify", "--remote-timeout", "5", store], 2, "--remote-timeout is for s3:// and https:// URLs"),
            (["inspect", "--s3-endpoint", "http://127.0.0.1:1", store], 2, "--s3-endpoint is for s3:// and https://"),
        ]
        for args, status, message in mistakes:
            p = run(*args, check=False)
            self.assertEqual(p.returncode, status, f"{args}: {p.stderr}")
            self.assertIn(message, p.stderr, args)
            self.assertEqual(sorted(os.listdir(self.tmp)), before, f"{args} wrote something")
        # One store's ORIGINAL may be the directory that holds it, as
        # unpack's DST may be: DIR/NAME is compared, not DIR.
        p = run("verify", store, "--against", self.tmp)
        self.assertIn("identical to the original", p.stdout)
        (self.tmp / "other").mkdir()
        p = run("verify", store, "--against", self.tmp / "other", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn(str(self.tmp / "other" / "small.safetensors"), p.stdout)

    def small_model(self):
        src = self.tmp / "small.safetensors"
        src.write_bytes(safetensors([("w", "BF16", [4096], os.urandom(8192))]))
        return src

    def test_outputs_write_through_symlinks_and_never_replace_devices(self):
        src = self.small_model()
        # A link (a hub cache's snapshot entry, say) stays a link: its target
        # becomes the output.
        target = self.tmp / "target.ptwm"
        target.write_bytes(b"old")
        (self.tmp / "link.ptwm").symlink_to("target.ptwm")
        run("pack", src, self.tmp / "link.ptwm")
        self.assertTrue((self.tmp / "link.ptwm").is_symlink())
        run("verify", target, "--against", src)
        # A device is never renamed over (as root, /dev/stdout or /dev/null
        # would have been replaced by a regular file).
        if os.geteuid() != 0:
            self.skipTest("mknod needs root: skipped the device case")
        device = self.tmp / "null"
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        for args in (("pack", src, device), ("unpack", target, device)):
            p = run(*args, check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("exists and is not a regular file (a device, FIFO or socket)", p.stderr)
            self.assertTrue(stat.S_ISCHR(os.lstat(device).st_mode))

    def test_outputs_take_the_source_mode_less_the_umask(self):
        src = self.small_model()
        os.chmod(src, 0o640)
        run("pack", src, self.tmp / "a.ptwm")
        self.assertEqual(stat.S_IMODE(os.stat(self.tmp / "a.ptwm").st_mode), 0o640)
        run("unpack", self.tmp / "a.ptwm", self.tmp / "a.safetensors")
        self.assertEqual(stat.S_IMODE(os.stat(self.tmp / "a.safetensors").st_mode), 0o640)
        os.chmod(src, 0o666)
        p = subprocess.run([TOOL, "pack", src, self.tmp / "b.ptwm"], capture_output=True, text=True,
                           preexec_fn=lambda: os.umask(0o077))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(stat.S_IMODE(os.stat(self.tmp / "b.ptwm").st_mode), 0o600)

    def test_unpacking_a_packed_snapshot_gives_the_model_directory(self):
        # One model out of a packed hub cache, as a plain directory: its
        # snapshot's links lead out of it into ../../blobs, where the
        # weights are stores now (ETAG.ptwm). Unpacked as links they would
        # all dangle; as pack takes a snapshot's blobs in the links' place,
        # unpack decodes or copies them there.
        hub = self.tmp / "hub"
        make_hub_cache.make_hub_cache(str(hub))
        run("pack", hub, self.tmp / "packed")
        repo = f"{make_hub_cache.REPO}/snapshots/{make_hub_cache.REVISION}"
        run("unpack", self.tmp / "packed" / repo, self.tmp / "model")
        original = hub / repo
        for name in ("model.safetensors", "config.json", "1_Pooling/config.json"):
            self.assertFalse(os.path.islink(self.tmp / "model" / name), name)
            self.assertEqual(sha256(self.tmp / "model" / name), sha256(original / name), name)

    def test_outputs_keep_the_source_modification_time(self):
        # A Hugging Face cache's scan (scan-cache's LAST_MODIFIED) reads the
        # blobs' times: packed, mounted or unpacked, a blob downloaded a
        # year ago must not look written a moment ago.
        src = self.tmp / "model"
        src.mkdir()
        (src / "model.safetensors").write_bytes(self.small_model().read_bytes())
        (src / "config.json").write_text('{"hidden_size": 64}\n')
        mtime = 1_650_000_000_987_654_321
        for name in ("model.safetensors", "config.json"):
            os.utime(src / name, ns=(mtime, mtime))
        run("pack", src, self.tmp / "packed")
        run("unpack", self.tmp / "packed", self.tmp / "unpacked")
        run("pack", src / "model.safetensors", self.tmp / "one.ptwm")
        run("unpack", self.tmp / "one.ptwm", self.tmp / "one.safetensors")
        for path in ("packed/model.safetensors.ptwm", "packed/config.json", "unpacked/model.safetensors",
                     "unpacked/config.json", "one.ptwm", "one.safetensors"):
            self.assertEqual(os.stat(self.tmp / path).st_mtime_ns, mtime, path)

    def test_directory_pack_refuses_store_names_and_its_own_inside(self):
        src = self.tmp / "d"
        src.mkdir()
        (src / "x").write_bytes(self.small_model().read_bytes())
        (src / "x.ptwm").write_text("notes that would overwrite x's store")
        p = run("pack", src, self.tmp / "out", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("x.ptwm: a source file named *.ptwm would be taken for a store", p.stderr)
        self.assertFalse((self.tmp / "out").exists(), "nothing should be written")
        (src / "x.ptwm").unlink()
        for args in (("pack", src, src / "out"), ("pack", src, src)):
            p = run(*args, check=False)
            self.assertEqual(p.returncode, 1, args)
            self.assertIn("which it would mirror into itself", p.stderr)
        run("pack", src, self.tmp / "packed")
        p = run("unpack", self.tmp / "packed", self.tmp / "packed" / "restore", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("which it would mirror into itself", p.stderr)
        self.assertEqual(sorted(os.listdir(src)), ["x"])
        # Run a second time, `pack d d/out` must still say that DST is
        # inside SRC, not that the first run's stores are *.ptwm sources.
        (src / "out").mkdir()
        (src / "out" / "x.ptwm").write_bytes(b"a store of a first run")
        p = run("pack", src, src / "out", check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("which it would mirror into itself", p.stderr)
        (src / "note.txt").write_text("")
        p = run("pack", src, src / "note.txt", check=False)
        self.assertIn("note.txt: exists and is not a directory", p.stderr)
        shutil.rmtree(src / "out")
        (src / "note.txt").unlink()
        self.assertEqual(sorted(os.listdir(src)), ["x"])
        # A DST none of whose directories exists yet, inside SRC given
        # relative: libstdc++'s weakly_canonical gave it back relative, no
        # prefix of SRC's absolute path, and pack nested its staging
        # directory in itself until ENAMETOOLONG.
        for src_arg, dst_arg in ((".", "out"), ("./", "sub/out"), (".", ".")):
            p = subprocess.run([TOOL, "pack", src_arg, dst_arg], capture_output=True, text=True, cwd=src)
            self.assertEqual(p.returncode, 1, (src_arg, dst_arg, p.stderr))
            self.assertIn("which it would mirror into itself", p.stderr)
            self.assertEqual(sorted(os.listdir(src)), ["x"], (src_arg, dst_arg))

    def test_a_missing_source_is_missing_before_its_name_is_judged(self):
        # A name no manifest could hold (not UTF-8) on a source that is not
        # there: "no such file", not advice to rename it.
        missing = self.tmp / os.fsdecode(b"gone\xfe.safetensors")
        for args in (("--manifest", missing, self.tmp / "out"), (missing, self.tmp / "out.ptwm")):
            p = subprocess.run([TOOL, "pack", "-q", *map(str, args)], capture_output=True)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(b".safetensors: no such file or directory", p.stderr)
            self.assertNotIn(b"UTF-8", p.stderr)
        self.assertEqual(os.listdir(self.tmp), [], "nothing should be written")

    def test_a_fifo_or_device_source_is_refused_not_waited_on(self):
        fifo = self.tmp / "fifo"
        os.mkfifo(fifo)
        for src in (fifo, "/dev/zero"):
            p = subprocess.run([TOOL, "pack", src, self.tmp / "x.ptwm"], capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(f"{src}: not a regular file or directory", p.stderr)

    def test_new_directories_given_with_a_trailing_slash(self):
        src = self.model_dir()
        run("pack", src, str(self.tmp / "out1") + "/")
        run("unpack", str(self.tmp / "out1") + "/", str(self.tmp / "deeper" / "un1") + "/")
        self.assertEqual(sha256(self.tmp / "deeper" / "un1" / "model.safetensors"), sha256(src / "model.safetensors"))
        self.assertEqual([n for n in os.listdir(self.tmp) if n.startswith(".")], [])

    def test_a_dangling_symlink_output_creates_its_target(self):
        # A hub cache's snapshot link whose blob is not there yet.
        (self.tmp / "blobs").mkdir()
        (self.tmp / "link.ptwm").symlink_to("blobs/abc")
        run("pack", self.small_model(), self.tmp / "link.ptwm")
        self.assertTrue((self.tmp / "link.ptwm").is_symlink())
        run("verify", self.tmp / "blobs" / "abc")

    def test_verify_names_the_first_differing_byte_of_a_copied_file(self):
        src = self.tmp / "d"
        src.mkdir()
        (src / "notes.txt").write_bytes(b"0123456789" * 1000)
        run("pack", src, self.tmp / "packed")
        (src / "notes.txt").write_bytes(b"01234X6789" + b"0123456789" * 999)
        p = run("verify", self.tmp / "packed", "--against", src, check=False)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn(f"differs from {src / 'notes.txt'} at byte 5", p.stdout)

    def test_an_output_that_is_its_own_input_is_refused(self):
        src = self.small_model()
        before = src.read_bytes()
        p = run("pack", src, src, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("itself, which the output would replace", p.stderr)
        self.assertEqual(src.read_bytes(), before)
        store = self.tmp / "un" / "foo"
        store.parent.mkdir()
        run("pack", src, store)
        p = run("unpack", store, store.parent, check=False)  # un/foo again: a store named without .ptwm
        self.assertEqual(p.returncode, 1)
        self.assertIn("itself, which the output would replace", p.stderr)

    def test_a_directory_destination_linking_back_into_its_source_is_refused(self):
        # Into an existing destination, outputs write through links: one that
        # leads back to its own input (or a subdirectory that leads into the
        # source) would replace the input, which directory packs and unpacks
        # did, exiting 0.
        src = self.tmp / "src"
        (src / "sub").mkdir(parents=True)
        shutil.copy(self.small_model(), src / "m.safetensors")
        (src / "sub" / "config.json").write_text("{}")
        originals = {p: p.read_bytes() for p in (src / "m.safetensors", src / "sub" / "config.json")}
        cases = {
            "store": ("m.safetensors.ptwm", "../src/m.safetensors", "itself, which the output would replace"),
            "copy": ("sub", "../src/sub", "which it would mirror into itself"),
        }
        for name, (entry, target, message) in cases.items():
            dst = self.tmp / f"dst-{name}"
            dst.mkdir()
            os.symlink(target, dst / entry)
            p = run("pack", src, dst, check=False)
            self.assertEqual(p.returncode, 1, name)
            self.assertIn(message, p.stderr, name)
            for path, before in originals.items():
                self.assertEqual(path.read_bytes(), before, f"{name}: {path} untouched")
        packed = self.tmp / "packed"
        run("pack", src, packed)
        store = (packed / "m.safetensors.ptwm").read_bytes()
        out = self.tmp / "out"
        out.mkdir()
        os.symlink("../packed/m.safetensors.ptwm", out / "m.safetensors")
        p = run("unpack", packed, out, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("itself, which the output would replace", p.stderr)
        self.assertEqual((packed / "m.safetensors.ptwm").read_bytes(), store)

    def test_on_bad_copy_does_not_take_a_write_error_for_a_bad_file(self):
        src = self.tmp / "d"
        src.mkdir()
        (src / "m.safetensors").write_bytes(safetensors([("w", "F32", [65536], os.urandom(262144))]))

        def small_files():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal
            resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
        p = subprocess.run([TOOL, "pack", "--on-bad", "copy", src, self.tmp / "out"], capture_output=True, text=True,
                           preexec_fn=small_files)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("write failed", p.stderr)
        self.assertNotIn("copying unchanged", p.stderr)

    def test_interrupt_removes_the_partial_output_and_keeps_the_old_one(self):
        # 96 MB of BF16-like values: a pack or unpack of some tenths of a
        # second, long enough to signal once its temporary file is there.
        src = self.tmp / "big.safetensors"
        write_large_bf16(src, 48 << 20)
        run("pack", src, self.tmp / "whole.ptwm")
        for cmd, source, out in [("pack", src, "big.safetensors.ptwm"), ("unpack", self.tmp / "whole.ptwm", "big.safetensors")]:
            dst = self.tmp / cmd
            dst.mkdir()
            (dst / out).write_bytes(b"the previous output")
            returncode, err = run_interrupted([TOOL, cmd, "-j1", source, dst],
                                              lambda: any(".tmp." in name for name in os.listdir(dst)))
            self.assertEqual(returncode, 128 + signal.SIGINT, f"{cmd}: {err}")
            self.assertIn("interrupted by SIGINT", err)
            self.assertEqual(os.listdir(dst), [out], f"{cmd} left its temporary file")
            self.assertEqual((dst / out).read_bytes(), b"the previous output")

    def test_a_killed_runs_staging_directory_is_removed_by_the_next_run(self):
        # SIGKILL (the OOM killer, a power cut) leaves the hidden sibling a
        # new DST is staged in, as big as the packed tree; the next run for
        # that DST removes it, but never one a live run holds locked.
        src = self.model_dir()
        abandoned = self.tmp / ".out.tmp.Ab3dEf"
        (abandoned / "sub").mkdir(parents=True)
        (abandoned / "model.safetensors.ptwm").write_bytes(b"half a store")
        live = self.tmp / ".out.tmp.L1vE00"
        live.mkdir()
        fd = os.open(live, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            p = run("pack", src, self.tmp / "out")
            self.assertIn(".out.tmp.Ab3dEf", p.stderr)
            self.assertFalse(abandoned.exists(), "a killed run's staging directory was left")
            self.assertTrue(live.exists(), "a live run's staging directory was removed")
            self.assertNotIn(".out.tmp.L1vE00", p.stderr)
        finally:
            os.close(fd)
        # unpack stages a new DST the same way.
        (self.tmp / ".back.tmp.Xy9Zw8").mkdir()
        run("unpack", self.tmp / "out", self.tmp / "back")
        self.assertEqual(sorted(n for n in os.listdir(self.tmp) if n.startswith(".")), [".out.tmp.L1vE00"])
        # Into an existing DST, a killed run leaves a file's temporary in
        # it, which the mount would show and unpack copy: the next run
        # writing that file removes it, and one locked by a live run stays.
        for cmd, source, dst, name in [("pack", src, self.tmp / "out", "model.safetensors.ptwm"),
                                       ("unpack", self.tmp / "out", self.tmp / "back", "config.json")]:
            abandoned = dst / f".{name}.tmp.Ab3dEf"
            abandoned.write_bytes(b"half an output")
            live = dst / f".{name}.tmp.L1vE00"
            live.write_bytes(b"being written")
            fd = os.open(live, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                p = run(cmd, source, dst)
            finally:
                os.close(fd)
            self.assertIn(abandoned.name, p.stderr, cmd)
            self.assertFalse(abandoned.exists(), f"{cmd}: a killed run's temporary was left")
            self.assertTrue(live.exists(), f"{cmd}: a live run's temporary was removed")

    def test_corpus_round_trips_through_the_command_line(self):
        if not CORPUS.is_dir():
            self.skipTest(f"no corpus at {CORPUS}: skipped")
        run("pack", CORPUS, self.tmp / "packed")
        run("unpack", self.tmp / "packed", self.tmp / "back")
        for f in sorted(CORPUS.iterdir()):
            self.assertEqual(sha256(self.tmp / "back" / f.name), sha256(f), f.name)

    def test_manifest_lists_every_entry_at_its_own_path(self):
        # Links whose targets exist once packed (the config blob is copied
        # under its own name) were listed at their resolved target's path.
        hub = self.tmp / "hub"
        links = make_hub_cache.make_hub_cache(str(hub))
        packed = self.tmp / "packed"
        run("pack", "-q", "--manifest", hub, packed)
        entries = json.loads((packed / "ptwmfs-manifest.json").read_text())["entries"]
        paths = [e["path"] for e in entries]
        self.assertEqual(len(paths), len(set(paths)), "a path is listed twice")
        for i, path in enumerate(paths):
            if "/" in path:
                self.assertIn(path.rsplit("/", 1)[0], paths[:i], f"{path} comes before its directory")
        on_disk = {}
        for dirpath, dirnames, filenames in os.walk(packed):  # links are not followed
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                rel = str(p.relative_to(packed))
                if p.is_symlink():
                    on_disk[rel] = ("link", os.readlink(p))
                elif p.is_dir():
                    on_disk[rel] = ("dir",)
                elif rel != "ptwmfs-manifest.json":
                    on_disk[rel] = ("store" if name.endswith(".ptwm") else "file", p.stat().st_size)
        listed = {e["path"]: ("link", e["target"]) if e["kind"] == "link" else
                  ("dir",) if e["kind"] == "dir" else (e["kind"], e["size"]) for e in entries}
        self.assertEqual(listed, on_disk)
        for path, target in links.items():
            self.assertEqual(listed[path], ("link", target), path)

    def test_a_snapshot_directory_packs_the_files_its_links_lead_to(self):
        # snapshot_download returns snapshots/REV, whose files are links into
        # ../../blobs: packed as links they all dangled in DST, and pack said
        # nothing at all. Links out of SRC now give their files, packed or
        # copied in their place; links inside SRC stay links.
        hub = self.tmp / "hub"
        make_hub_cache.make_hub_cache(str(hub))
        repo = hub / make_hub_cache.REPO
        snapshot = repo / "snapshots" / make_hub_cache.REVISION
        os.symlink("config.json", snapshot / "alias.json")  # inside SRC: stays a link
        os.symlink("../../refs", snapshot / "refs")          # a directory outside: stays a link
        packed = self.tmp / "packed"
        out = run("pack", snapshot, packed).stdout
        self.assertIn("packed 1 safetensors file(s)", out)
        self.assertIn("copied 2 other file(s)", out)
        self.assertIn(f"3 of them behind symbolic links that lead out of {snapshot}", out)
        self.assertTrue((packed / "model.safetensors.ptwm").is_file())
        self.assertFalse((packed / "model.safetensors.ptwm").is_symlink())
        for name in ("config.json", "1_Pooling/config.json"):
            self.assertFalse((packed / name).is_symlink(), name)
            self.assertEqual((packed / name).read_text(), '{"hidden_size": 64}\n', name)
        self.assertEqual(os.readlink(packed / "alias.json"), "config.json")
        self.assertEqual(os.readlink(packed / "refs"), "../../refs")
        p = run("verify", packed, "--against", snapshot, check=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        run("unpack", packed, self.tmp / "back")
        self.assertEqual(sha256(self.tmp / "back" / "model.safetensors"),
                         sha256(repo / "blobs" / make_hub_cache.WEIGHTS_BLOB))
        # A link verify finds where a file was packed (or the other way) is
        # still a difference.
        os.remove(packed / "alias.json")
        (packed / "alias.json").write_text('{"hidden_size": 64}\n')
        p = run("verify", packed, "--against", snapshot, check=False)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn(f"{snapshot}/alias.json: a symlink, but {packed}/alias.json is not", p.stdout + p.stderr)

    def test_manifest_refuses_a_name_that_is_not_utf8_before_writing(self):
        src = self.tmp / "d"
        src.mkdir()
        (src / "ok.json").write_text("{}")
        (src / os.fsdecode(b"c\xfe.json")).write_text("{}")
        p = run("pack", "-q", "--manifest", src, self.tmp / "p", check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"{src}/c\\xfe.json: the name is not valid UTF-8", p.stderr)
        self.assertIn("manifest (JSON)", p.stderr)
        self.assertFalse((self.tmp / "p").exists(), "pack wrote before refusing")
        run("pack", "-q", src, self.tmp / "plain")  # without a manifest the name is fine
        self.assertTrue((self.tmp / "plain" / os.fsdecode(b"c\xfe.json")).is_file())

        links = self.tmp / "links"
        links.mkdir()
        os.symlink(os.fsdecode(b"t\xff"), links / "l")
        p = run("pack", "-q", "--manifest", links, self.tmp / "q", check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"{links}/l: link target 't\\xff' is not valid UTF-8", p.stderr)
        self.assertFalse((self.tmp / "q").exists())

    def test_inspect_json_shows_a_name_that_is_not_utf8(self):
        store = self.tmp / os.fsdecode(b"bad\xff.ptwm")
        run("pack", "-q", self.model_dir() / "model.safetensors", store)
        p = subprocess.run([TOOL, "inspect", "--json", store], capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout.decode("utf-8"))
        self.assertEqual(doc["file"], f"{self.tmp}/bad\ufffd.ptwm", "each bad byte shows as U+FFFD")
        self.assertEqual([t["name"] for t in doc["tensors"]], ["a", "b"])

    def test_inspect_table_escapes_control_characters_in_names(self):
        # A hostile file's tensor names: a terminal escape (ESC [ and the C1
        # CSI), a bell and a newline that would forge a row. The table shows
        # them as \xHH; --json keeps them, escaped as JSON escapes them.
        names = ["evil\x1b[2J\x07", "row\nforged 0 0", "csi\u009b31m"]
        src = self.tmp / "hostile.safetensors"
        src.write_bytes(safetensors([(n, "U8", [4], bytes([i, 1, 2, 3])) for i, n in enumerate(names)]))
        store = self.tmp / "hostile.ptwm"
        run("pack", "-q", src, store)
        for args in ((), ("--chunks",)):
            table = subprocess.run([TOOL, "inspect", *args, store], capture_output=True, check=True).stdout
            for control in (b"\x1b", b"\x07", b"\xc2\x9b"):
                self.assertNotIn(control, table, args)
            self.assertIn(rb"evil\x1b[2J\x07", table)
            self.assertIn(rb"row\x0aforged 0 0", table)
            self.assertIn(rb"csi\xc2\x9b31m", table)
            self.assertFalse(any(line.startswith(b"forged") for line in table.splitlines()), "a forged row")
        doc = json.loads(run("inspect", "--json", "--chunks", store).stdout)
        self.assertEqual([t["name"] for t in doc["tensors"]], names)
        self.assertEqual({c["tensor"] for c in doc["chunks"]}, set(names))

    def test_messages_escape_control_characters_in_file_names(self):
        # A file name is as hostile as a tensor name: pack's, verify's and
        # the errors' lines show its control bytes as \xHH, never raw.
        src = self.tmp / "hostile"
        src.mkdir()
        shutil.copy(self.model_dir() / "model.safetensors", src / "a\x1b[2Jred.safetensors")
        (src / "b\x1b]0;title\x07.safetensors").write_bytes(b"junk")
        p = subprocess.run([TOOL, "pack", src, self.tmp / "p"], capture_output=True)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(rb"b\x1b]0;title\x07.safetensors: not a safetensors file", p.stderr)
        p = subprocess.run([TOOL, "pack", "--on-bad", "copy", src, self.tmp / "q"], capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(rb"warning: copying unchanged: ", p.stderr)
        self.assertIn(rb"a\x1b[2Jred.safetensors: ", p.stdout)
        v = subprocess.run([TOOL, "verify", self.tmp / "q"], capture_output=True)
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertIn(rb"OK " + bytes(self.tmp / "q") + rb"/a\x1b[2Jred.safetensors.ptwm", v.stdout)
        u = subprocess.run([TOOL, "unpack", self.tmp / "gone\x1b[2J.ptwm", self.tmp / "out"], capture_output=True)
        self.assertEqual(u.returncode, 1, u.stderr)
        self.assertIn(rb"gone\x1b[2J.ptwm", u.stderr)
        for output in (p.stdout, p.stderr, v.stdout, u.stderr):
            self.assertNotIn(b"\x1b", output)
            self.assertNotIn(b"\x07", output)

    def test_inspect_memory_stays_proportional_to_the_file(self):
        # 30,000 tensors of two F32 values (a 2.8 MB file). inspect kept 2 KiB
        # histograms of every tensor and plane (10 KB a tensor) and built the
        # whole JSON document before printing: 480-580 MB resident, 1.6-2 GB
        # for 100,000 tensors. Now about 27 MB; the limit is generous.
        if sanitized_tool():
            self.skipTest("under ASan or TSan the peak resident size is the sanitizer's (shadow, quarantine)")
        src, store = self.tmp / "many.safetensors", self.tmp / "many.ptwm"
        src.write_bytes(safetensors([(f"layers.{i}.weight", "F32", [2], bytes((i * 7 + k) % 256 for k in range(8)))
                                     for i in range(30000)]))
        run("pack", "-q", src, store)
        for args in ((), ("--json",)):
            p = subprocess.Popen([TOOL, "inspect", *args, store], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(p.pid, 0)  # this child's own peak, not the test's other children's
            p.returncode = os.waitstatus_to_exitcode(status)
            self.assertEqual(p.returncode, 0, args)
            self.assertLess(usage.ru_maxrss, 200 << 10, f"inspect {args}: peak resident {usage.ru_maxrss >> 10} MiB")


if __name__ == "__main__":
    unittest.main(verbosity=2)
