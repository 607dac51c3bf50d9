"""What the Python client's tests share: a real ltd on a temp socket, process scans, polling.

The binaries come from the build tree, named by ctest's environment
(LTD_BIN, LTCTL_BIN, LTRUN_BIN); the ``ltd`` package from PYTHONPATH
(build/python). Every wait polls a condition with a deadline.
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

LTD_BIN = os.environ.get("LTD_BIN", "")
LTCTL_BIN = os.environ.get("LTCTL_BIN", "")
LTRUN_BIN = os.environ.get("LTRUN_BIN", "")
PYTHON = "/usr/bin/python3"


def have_module(name):
    import importlib.util

    return importlib.util.find_spec(name) is not None


def wait_for(pred, timeout, step=0.05):
    """Polls ``pred`` until it holds (returns True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(step)


class CpuHogs:
    """Two processes that spin while in use: a machine as busy as one with another job beside."""

    def __enter__(self):
        self.procs = [subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"]) for _ in range(2)]
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def every_line_once(lines, ranks, n):
    """'' if ``lines`` has "[R] n I" for I in 0..n-1 of each rank, once each, in order; else what is wrong."""
    at = {r: 0 for r in range(ranks)}
    for line in lines:
        if not line.startswith("[") or "] n " not in line:
            continue
        r, i = line[1:].split("] n ")
        r, i = int(r), int(i)
        if r not in at or i != at[r]:
            return "%r: rank %s was at line %s" % (line, r, at.get(r))
        at[r] += 1
    short = {r: i for r, i in at.items() if i != n}
    return "" if not short else "ranks stopped short (rank: lines): %r" % short


def _live(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] != b"Z"


def processes_with_marker(marker):
    """Pids of live (non-zombie) processes whose environment holds ``marker`` (K=V)."""
    needle = marker.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if needle in env and _live(pid):
            found.append(pid)
    return found


def kill_marked(marker, keep=()):
    """SIGKILLs what a failed test left of a job (processes with ``marker``), by pid."""
    for pid in processes_with_marker(marker):
        if pid not in keep:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def connectable(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


class Daemon:
    """A real ltd on a temp socket and state dir; stopped and removed by ``stop()``."""

    def __init__(self, *extra):
        self.dir = tempfile.mkdtemp(prefix="ltpy.", dir="/tmp")
        os.chmod(self.dir, 0o755)  # a throwaway user reaches the socket
        self.socket = os.path.join(self.dir, "ltd.sock")
        self.state_dir = os.path.join(self.dir, "state")
        self.extra = list(extra)
        self.proc = None
        self.log_path = os.path.join(self.dir, "ltd.log")

    def start(self):
        args = [LTD_BIN, "--socket", self.socket, "--state-dir", self.state_dir, "--log-level", "debug",
                "--devices", "8"]
        if "--restore-window" not in self.extra:
            args += ["--restore-window", "0"]
        args += self.extra
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log)
        if not wait_for(lambda: connectable(self.socket) or self.proc.poll() is not None, 30):
            raise RuntimeError("ltd did not listen within 30 s; its log: " + self.log())
        if self.proc.poll() is not None:
            raise RuntimeError("ltd exited %d at start: %s" % (self.proc.returncode, self.log()))
        return self

    def log(self, tail=4000):
        try:
            with open(self.log_path, errors="replace") as f:
                text = f.read()
                return text[-tail:] if tail else text
        except OSError:
            return ""

    def terminate(self):
        """SIGTERM, then SIGKILL after 30 s; waits for ltd to be gone."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()

    def kill_hard(self):
        """SIGKILL, as a crash: its socket file stays, nothing listens on it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.kill()
        self.proc.wait()
        self._log.close()

    def stop(self):
        self.terminate()
        shutil.rmtree(self.dir, ignore_errors=True)

    def ltctl(self, *args, timeout=60):
        return subprocess.run([LTCTL_BIN, "--socket", self.socket, *args], capture_output=True,
                              timeout=timeout)


def needs_binaries(test):
    missing = [n for n, p in (("LTD_BIN", LTD_BIN), ("LTRUN_BIN", LTRUN_BIN)) if not p or not os.path.exists(p)]
    if missing:
        return unittest.skip("run under ctest: %s not set" % ", ".join(missing))(test)
    return test
