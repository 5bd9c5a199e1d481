"""ZipNN as a peer of codec_bench, in a process of its own (ZipNN is a
Python package with a C core): codec_bench starts it once with .venv's
python, then drives it over stdin/stdout, one JSON line per command, so that
its timings are taken in the same rounds as ours and zstd's (interleaved).

    -> (on start)      {"ok": true, "version": "0.5.4"} | {"ok": false, "error": "..."}
    <- open PATH       loads a .safetensors file, compresses every tensor once,
    ->                 checks the round trip byte for byte: {"ok": true, "stored": N, ...}
    <- round           one timed compression and one decompression of every tensor:
    ->                 {"ok": true, "compress_s", "compress_cpu_s", "decompress_s", "decompress_cpu_s"}
    <- quit

What is measured is ZipNN's per-tensor mode, as its own
zipnn_compress_safetensors.py script uses it: every floating-point tensor is
compressed on its own with method HUFFMAN and ZipNN's settings for its dtype
(byte grouping and bit reorder chosen by ZipNN from the dtype); tensors
ZipNN does not code (integers, F64) and tensors it cannot shrink stay raw.
Here it runs on one thread (threads=1), in memory, on byte buffers
(input_format "byte": no torch tensors are built). The stored size counts
the file's header, every raw tensor and every ZipNN buffer (each with its
32-byte ZipNN header), so the ratio has the same denominator as ours: the
whole file. Decompression time is ZipNN's decompress() of every compressed
tensor (each returns a new buffer); raw tensors cost nothing.

ZipNN 0.5.4 reorders the bits of its input in place (BF16, F32, FP8: even
an immutable bytes object), so every compression is handed a fresh copy of
the tensor, made outside the timed section.
"""
import json
import struct
import sys
import time

# safetensors dtype -> ZipNN's bytearray_dtype (the floating types it codes)
ZIPNN_DTYPES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32",
                "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}


def import_zipnn():
    import torch
    # ZipNN's dtype table names torch.float8_e4m3fn and torch.float8_e5m2 at
    # import time; Debian's torch 1.13 predates them. The byte-buffer path
    # measured here never makes a torch tensor, so stand-ins let the module
    # import; with torch >= 2.1 nothing is patched.
    for name in ("float8_e4m3fn", "float8_e5m2"):
        if not hasattr(torch, name):
            setattr(torch, name, type(name, (), {"__repr__": lambda self, n=name: f"<stand-in torch.{n}>"})())
    import zipnn
    from importlib.metadata import version
    return zipnn, version("zipnn")


class Peer:
    def __init__(self, zipnn):
        self.zipnn = zipnn
        self.coders = {}

    def coder(self, dtype, role):
        key = (dtype, role)
        if key not in self.coders:  # one per dtype and direction, reused, as a caller that cares would
            self.coders[key] = self.zipnn.ZipNN(method="HUFFMAN", input_format="byte", bytearray_dtype=dtype, threads=1)
        return self.coders[key]

    def open(self, path):
        self.tensors = []
        with open(path, "rb") as f:
            data = f.read()
        (length,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + length])
        header.pop("__metadata__", None)
        begin = 8 + length
        view = memoryview(data)
        self.tensors = []  # (zipnn dtype or None, original view, compressed bytes or None)
        stored = begin
        for info in sorted(header.values(), key=lambda t: t["data_offsets"][0]):
            a, b = info["data_offsets"]
            original = view[begin + a:begin + b]
            dtype = ZIPNN_DTYPES.get(info["dtype"])
            packed = None
            if dtype and len(original) > 0:
                packed = bytes(self.coder(dtype, "c").compress(bytearray(original)))  # a copy: see above
                if len(packed) >= len(original):
                    packed = None  # kept raw, as ZipNN's own script does
            self.tensors.append((dtype, original, packed))
            stored += len(packed) if packed is not None else len(original)
        # The round trip, before any timing: the file rebuilt from the header,
        # the raw tensors and ZipNN's output must be the original, byte for byte.
        rebuilt = bytearray(data[:begin])
        for dtype, original, packed in self.tensors:
            rebuilt += self.coder(dtype, "d").decompress(packed) if packed is not None else original
        if rebuilt != data:
            raise ValueError("ZipNN's round trip differs from the original")
        compressed = [t for t in self.tensors if t[2] is not None]
        return {"ok": True, "stored": stored, "size": len(data), "tensors": len(self.tensors),
                "compressed_tensors": len(compressed), "compressed_bytes": sum(len(t[1]) for t in compressed)}

    def round(self):
        work = [(dtype, original, packed) for dtype, original, packed in self.tensors if packed is not None]
        # Compression is timed call by call, since each needs a fresh copy of
        # its input; process CPU time, since ZipNN's C core runs a worker thread.
        compress_s = compress_cpu_s = 0.0
        for dtype, original, _ in work:
            scratch = bytearray(original)
            wall, cpu = time.perf_counter(), time.process_time()
            self.coder(dtype, "c").compress(scratch)
            compress_s += time.perf_counter() - wall
            compress_cpu_s += time.process_time() - cpu
        wall, cpu = time.perf_counter(), time.process_time()
        for dtype, _, packed in work:
            self.coder(dtype, "d").decompress(packed)
        return {"ok": True, "compress_s": compress_s, "compress_cpu_s": compress_cpu_s,
                "decompress_s": time.perf_counter() - wall, "decompress_cpu_s": time.process_time() - cpu}


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    try:
        zipnn, version = import_zipnn()
    except Exception as e:  # noqa: BLE001 - any reason it cannot run is reported, not raised
        reply({"ok": False, "error": f"cannot import zipnn ({type(e).__name__}: {e})"})
        return 1
    reply({"ok": True, "version": version})
    peer = Peer(zipnn)
    for line in sys.stdin:
        command, _, argument = line.rstrip("\n").partition(" ")
        try:
            if command == "open":
                reply(peer.open(argument))
            elif command == "round":
                reply(peer.round())
            elif command == "quit":
                return 0
            else:
                reply({"ok": False, "error": f"unknown command {command!r}"})
        except Exception as e:  # noqa: BLE001
            reply({"ok": False, "error": f"{type(e).__name__}: {e}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
