"""MUNGE's cost in a multi-node run (issue 37): a munged of the bench's own
(a key made here, its socket in a temp dir), what one record costs to seal
and to check (libmunge through ctypes, as ltrun calls it: a credential
over a 1 KiB report, then its decode; the decode's answer is kept per key
and revision, so each node pays one per record), and the 4-node crash in
network namespaces with --rdzv-auth none and munge.

Used by multinode_bench.py --munge; not a test.
"""

import ctypes
import os
import shutil
import statistics
import subprocess
import tempfile
import time


class Munged:
    """munged in the foreground with a key of its own; stop() leaves nothing."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="ltd-munge-bench.")
        os.chmod(self.dir, 0o755)  # munged wants every user able to reach its socket
        self.socket = os.path.join(self.dir, "munge.sock")
        key = os.path.join(self.dir, "munge.key")
        subprocess.run(["/usr/sbin/mungekey", "--create", f"--keyfile={key}"], check=True)
        self.proc = subprocess.Popen(
            ["/usr/sbin/munged", "--foreground", f"--key-file={key}", f"--socket={self.socket}",
             f"--pid-file={self.dir}/munged.pid", f"--seed-file={self.dir}/munged.seed",
             f"--log-file={self.dir}/munged.log", "--num-threads=4"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not os.path.exists(self.socket):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("munged did not start")
            time.sleep(0.01)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def record_cost(socket, n=300, size=1024):
    """Median microseconds to seal one record and to check it."""
    lib = ctypes.CDLL("libmunge.so.2")
    libc = ctypes.CDLL(None)
    lib.munge_ctx_create.restype = ctypes.c_void_p
    lib.munge_ctx_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p]
    lib.munge_ctx_destroy.argtypes = [ctypes.c_void_p]
    lib.munge_encode.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_void_p,
                                 ctypes.c_char_p, ctypes.c_int]
    lib.munge_decode.argtypes = [ctypes.c_char_p, ctypes.c_void_p,
                                 ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int),
                                 ctypes.c_void_p, ctypes.c_void_p]
    libc.free.argtypes = [ctypes.c_void_p]
    payload = b"x" * size
    enc, dec = [], []
    for _ in range(n):
        # A context per call, as the node's codec makes one per call.
        t0 = time.perf_counter()
        ctx = lib.munge_ctx_create()
        lib.munge_ctx_set(ctx, 8, socket.encode())  # MUNGE_OPT_SOCKET
        cred = ctypes.c_char_p()
        rc = lib.munge_encode(ctypes.byref(cred), ctx, payload, len(payload))
        lib.munge_ctx_destroy(ctx)
        t1 = time.perf_counter()
        if rc != 0:
            raise RuntimeError(f"munge_encode failed ({rc})")
        ctx = lib.munge_ctx_create()
        lib.munge_ctx_set(ctx, 8, socket.encode())
        buf, length = ctypes.c_void_p(), ctypes.c_int()
        rc = lib.munge_decode(cred.value, ctx, ctypes.byref(buf), ctypes.byref(length), None, None)
        lib.munge_ctx_destroy(ctx)
        t2 = time.perf_counter()
        libc.free(buf)
        if rc != 0:
            raise RuntimeError(f"munge_decode failed ({rc})")
        enc.append((t1 - t0) * 1e6)
        dec.append((t2 - t1) * 1e6)
    return statistics.median(enc), statistics.median(dec), len(cred.value)
