"""For tests that interrupt ptwmfs-tool mid-work: a large file made in a
blink, and a run signalled as soon as a sign of its work appears."""
import json
import os
import signal
import struct
import subprocess
import time


def write_large_bf16(path, values):
    """A safetensors file of one BF16 tensor of `values` elements, shaped
    like weights (random mantissas and signs, a handful of exponents), made
    without numpy at memory speed."""
    raw = os.urandom(2 * values)
    data = bytearray(raw)
    data[1::2] = raw[1::2].translate(bytes(0x3A + (b & 3) | (b & 0x80) for b in range(256)))
    header = json.dumps({"w": {"dtype": "BF16", "shape": [values], "data_offsets": [0, 2 * values]}}).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.write(data)


def run_interrupted(args, started, env=None, sig=signal.SIGINT, wait_s=60):
    """Runs `args`, sends `sig` once started() is true (polled every
    millisecond, for at most wait_s seconds) or the run ended by itself, and
    returns (returncode, stderr). The process never outlives the call."""
    p = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and p.poll() is None and not started():
            time.sleep(0.001)
        p.send_signal(sig)
        _, err = p.communicate(timeout=2 * wait_s)
        return p.returncode, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
