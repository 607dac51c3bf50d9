#!/usr/bin/python3
"""Benchmark of ltd under one user's attacks (issue 20).

User A attacks a real ltd; user B runs `ltctl ps` meanwhile. For each
attack, and at rest, prints: ltd's peak RSS (MiB, sampled every 50 ms),
its most fds, its CPU while B's `ps` ran and over the seconds before
(the attack alone), B's `ps` latency (median, max, ms) and how many of B's
`ps` succeeded; for the etcd attack, how long the job's root supervisor
outlived `ltctl kill`. Targets: B's ps N of N with a median under 3x the
idle median; ltd's RSS under 300 MiB; no root supervisor outliving its
job's grace period.

Attacks (counts reduced with --scale below 1):
  follow      A holds 200 `ltctl logs -f` of a quiet job
  attach      A holds 100 `ltctl attach` of a chatty job, stopped, unread
  auto-on     3 jobs of A with ~1.9 MB command lines whose rank writes
              `auto on` in a loop
  connect     A connects and closes as fast as it can (2 processes)
  etcd-kill   A submits 5 jobs that wait for an etcd that never answers
              (--rdzv-timeout 8760h) and kills them
  metrics-halfopen
              A holds 100 half-open requests (`GET /metrics HTTP/1.1`, no
              blank line) to ltd's metrics endpoint, opening them again as
              they are closed; also prints how long a scrape took beside them
  sparse-errors
              4 jobs of A each leave a 20G file of holes in errors/ and exit
              1; also prints how much the state dir grew once they ended
  stuck-mount A runs 8 `submit -d -o MNT/stuckN.log` at a time, round after
              round, on a FUSE mount that never answers (tests/hang_fs.cc)
  late-mount  the same on one that answers each lookup 4.5 s late

Needs root (it makes two throwaway users). Not a test: nothing is
asserted; a shared 2-core machine is noisy.
Usage: sudo bench/attack_bench.py [--build DIR] [--ps N] [--scale F] [--only A,B]
       [--ltd-arg=--user-max-connects=20 ...]
"""

import argparse
import os
import pwd
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user(name):
    if subprocess.run(["id", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "-M", "-s", "/bin/false", name], check=True)
    p = pwd.getpwnam(name)
    return p.pw_uid, p.pw_gid


def as_user(uid, gid):
    def drop():
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    return drop


def cpu_seconds(pid):
    """utime + stime of `pid` (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Sampler(threading.Thread):
    """ltd's RSS and fds, every 50 ms, until stopped."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.rss, self.fds, self.stop = pid, 0, 0, False

    def run(self):
        while not self.stop:
            try:
                with open(f"/proc/{self.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            self.rss = max(self.rss, int(line.split()[1]) // 1024)
                self.fds = max(self.fds, len(os.listdir(f"/proc/{self.pid}/fd")))
            except OSError:
                return
            time.sleep(0.05)


class Bench:
    def __init__(self, build, ps_runs, ltd_args=()):
        self.dir = tempfile.mkdtemp(prefix="ltd-attack.")
        os.chmod(self.dir, 0o755)
        self.ltctl = shutil.copy(f"{build}/client/ltctl", self.dir)
        self.child = shutil.copy(f"{build}/tests/lt_test_child", self.dir)
        self.sock = os.path.join(self.dir, "ltd.sock")
        self.ps_runs = ps_runs
        self.a = user("ltbencha")
        self.b = user("ltbenchb")
        self.log = open(os.path.join(self.dir, "ltd.log"), "w")
        self.ltd = subprocess.Popen(
            [f"{build}/daemon/ltd", "--socket", self.sock, "--state-dir", f"{self.dir}/state",
             "--devices", "16", "--log-level", "info", "--restore-window", "0",
             "--metrics-listen", "127.0.0.1:0", *ltd_args],
            stdout=self.log, stderr=self.log)
        deadline = time.time() + 20
        while not os.path.exists(self.sock):
            if time.time() > deadline or self.ltd.poll() is not None:
                sys.exit(f"ltd did not start; see {self.dir}/ltd.log")
            time.sleep(0.02)
        self.procs = []
        self.metrics = None  # (host, port), from ltd's log
        deadline = time.time() + 20
        while self.metrics is None and time.time() < deadline:
            with open(os.path.join(self.dir, "ltd.log")) as f:
                for line in f:
                    if "metrics on http://" in line:
                        hostport = line.split("metrics on http://")[1].split("/")[0]
                        host, port = hostport.rsplit(":", 1)
                        self.metrics = (host, int(port))
            time.sleep(0.05)

    def ctl(self, who, *args, timeout=60, **kw):
        return subprocess.run([self.ltctl, "--socket", self.sock, *args], capture_output=True,
                              text=True, timeout=timeout, preexec_fn=as_user(*who), **kw)

    def spawn(self, who, *args, **kw):
        p = subprocess.Popen([self.ltctl, "--socket", self.sock, *args], preexec_fn=as_user(*who),
                             stdin=subprocess.DEVNULL, **kw)
        self.procs.append(p)
        return p

    def submit(self, *args):
        r = self.ctl(self.a, "submit", "-d", "--devices", "1", *args)
        if r.returncode != 0:
            print(f"  submit failed: {r.stderr.strip()[:200]}")
            return None
        return r.stdout.strip()

    def measure(self, name, attack=None, settle=1.0):
        """Runs `attack` (it starts, returns a cleanup), then B's ps."""
        sampler = Sampler(self.ltd.pid)
        sampler.start()
        cleanup = attack() if attack else None
        # ltd's CPU over the second half of the settling time, before B's ps:
        # what the attack alone costs it (the ps window is a few tenths of a
        # second, 100 Hz ticks: 5 % steps).
        time.sleep(settle / 2)
        quiet0, quiet_wall0 = cpu_seconds(self.ltd.pid), time.monotonic()
        time.sleep(settle / 2)
        quiet = 100 * (cpu_seconds(self.ltd.pid) - quiet0) / (time.monotonic() - quiet_wall0)
        times, ok, errs = [], 0, set()
        cpu0, wall0 = cpu_seconds(self.ltd.pid), time.monotonic()
        for _ in range(self.ps_runs):
            t0 = time.perf_counter()
            try:
                r = self.ctl(self.b, "ps", timeout=30)
                good = r.returncode == 0
                if not good:
                    errs.add(r.stderr.strip()[:120])
            except subprocess.TimeoutExpired:
                good = False
                errs.add("timed out after 30 s")
            times.append((time.perf_counter() - t0) * 1000)
            ok += good
        # ltd's CPU while B's ps ran, as % of one core.
        cpu = 100 * (cpu_seconds(self.ltd.pid) - cpu0) / (time.monotonic() - wall0)
        extra = cleanup() if cleanup else ""
        time.sleep(0.3)
        sampler.stop = True
        sampler.join()
        print(f"{name:11} rss_peak={sampler.rss:5d} MiB fds_max={sampler.fds:6d} "
              f"ltd_cpu={cpu:3.0f}% ltd_cpu_before_ps={quiet:4.1f}% "
              f"ps_median={statistics.median(times):7.1f} ms ps_max={max(times):7.1f} ms "
              f"ps_ok={ok}/{self.ps_runs}{extra}", flush=True)
        for e in errs:
            print(f"           ps error: {e}")
        return statistics.median(times)

    def end_all(self):
        for p in self.procs:
            try:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait(timeout=10)
            except Exception:
                pass
        self.procs = []

    def kill(self, job):
        if job:
            self.ctl((0, 0), "kill", job, timeout=60)

    def stop(self):
        self.end_all()
        self.ltd.terminate()
        try:
            self.ltd.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.ltd.kill()
        self.log.close()
        for name in ("ltbencha", "ltbenchb"):
            subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
            subprocess.run(["userdel", name], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


class HangMount:
    """lt_hang_fs (tests/hang_fs.cc) mounted in the bench's dir, as root
    with allow_other; A's submits name files on it, round after round."""

    def __init__(self, b, fs):
        self.b, self.dir = b, os.path.join(b.dir, "mnt")
        os.makedirs(self.dir, exist_ok=True)
        # The connections' abort files, to end the hung mount at the end.
        self.fusectl = " fusectl " not in open("/proc/self/mountinfo").read()
        if self.fusectl:
            subprocess.run(["mount", "-t", "fusectl", "fusectl", "/sys/fs/fuse/connections"],
                           capture_output=True)
        self.server = subprocess.Popen([fs, self.dir], stdout=subprocess.PIPE)
        if not self.server.stdout.readline():
            sys.exit("lt_hang_fs did not mount")
        self.conn = f"/sys/fs/fuse/connections/{os.minor(os.stat(self.dir).st_dev)}"
        self.stop, self.rounds, self.answers = False, 0, {}

    def attack(self, name, per_round=8):
        def loop():
            while not self.stop:
                ps = [subprocess.Popen(
                    [self.b.ltctl, "--socket", self.b.sock, "submit", "-d", "--devices", "1",
                     "-o", f"{self.dir}/{name}{i}.log", "--", self.b.child, "print:1"],
                    preexec_fn=as_user(*self.b.a), stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                      for i in range(per_round)]
                for p in ps:
                    err = p.communicate(timeout=120)[1]
                    key = ("accepted" if p.returncode == 0 else
                           "refused at once" if "too many submits" in err else
                           "did not answer" if "did not answer" in err else err.strip()[:60])
                    self.answers[key] = self.answers.get(key, 0) + 1
                self.rounds += 1
        t = threading.Thread(target=loop, daemon=True)
        t.start()

        def stop():
            self.stop = True
            t.join(timeout=120)
            answers = ", ".join(f"{k}: {v}" for k, v in sorted(self.answers.items()))
            self.close()
            return f" rounds={self.rounds} ({answers})"
        return stop

    def close(self):
        # Every request still waiting fails, then the mount goes.
        try:
            with open(f"{self.conn}/abort", "w") as f:
                f.write("1")
        except OSError:
            pass
        subprocess.run(["umount", "-l", self.dir], capture_output=True)
        try:
            self.server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()
        if self.fusectl:
            subprocess.run(["umount", "-l", "/sys/fs/fuse/connections"], capture_output=True)


def shims_of(job):
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"lt-shim") and job.encode() in argv:
            n += 1
    return n


def du_bytes(path):
    """Bytes allocated under `path` (blocks, as du counts them)."""
    total = 0
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def scrape_ms(hostport, timeout=30):
    """One GET /metrics, in ms; None when it got no answer in `timeout`."""
    t0 = time.perf_counter()
    try:
        c = socket.create_connection(hostport, timeout=timeout)
        c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while True:
            chunk = c.recv(65536)
            if not chunk:
                break
            got += chunk
        c.close()
        return (time.perf_counter() - t0) * 1000 if got.startswith(b"HTTP/1.1 200") else None
    except OSError:
        return None


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def settle(b):
    # ltd gives freed memory back as a stream ends, at most once a second.
    time.sleep(1.2)
    b.ctl(b.b, "ps")


def memory(b, n):
    """ltd's RSS per finished job kept (~1.9 MB command lines) and per
    pending job (16,000 environment strings)."""
    filler = ["x" * 399] * 4750
    before = rss_kib(b.ltd.pid)
    jobs = [b.submit("--", b.child, *filler, "exit:0") for _ in range(n)]
    for j in jobs:
        if j:
            b.ctl(b.a, "wait", j, timeout=120)
    settle(b)
    kept = (rss_kib(b.ltd.pid) - before) / n
    blocker = b.ctl(b.a, "submit", "-d", "--devices", "16", "--", b.child, "hang").stdout.strip()
    env = {f"V{i}": "x" for i in range(16000)}
    env["PATH"] = "/usr/bin:/bin"
    before = rss_kib(b.ltd.pid)
    pending = []
    for _ in range(n):
        r = subprocess.run([b.ltctl, "--socket", b.sock, "submit", "-d", "--devices", "1", "--",
                            b.child, "exit:0"], capture_output=True, text=True, env=env,
                           preexec_fn=as_user(*b.a))
        pending.append(r.stdout.strip())
    settle(b)
    per_pending = (rss_kib(b.ltd.pid) - before) / n
    print(f"memory    per kept job (1.9 MB argv): {kept:.0f} KiB; per pending job "
          f"(16,000 env strings): {per_pending:.0f} KiB; over {n} jobs each")
    b.kill(blocker)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--ps", type=int, default=20)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--ltd-arg", action="append", default=[], help="passed on to ltd")
    ap.add_argument("--only", default="", help="comma-separated attacks to run (default: all)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("attack_bench needs root: it makes two throwaway users")
    s = lambda n: max(1, int(n * args.scale))  # noqa: E731
    b = Bench(args.build, args.ps, args.ltd_arg)
    only = set(filter(None, args.only.split(",")))

    def run(name, attack, settle):
        if not only or name in only:
            b.measure(name, attack, settle=settle)
    try:
        idle = b.measure("idle")

        def follow():
            job = b.submit("--", b.child, "print:3,hang")
            for _ in range(s(200)):
                b.spawn(b.a, "logs", "-f", job, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
            return lambda: (b.end_all(), b.kill(job), "")[2]
        run("follow", follow, 3)

        def attach():
            job = b.submit("--", b.child, "print:100000000")
            ps = [b.spawn(b.a, "attach", job, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                  for _ in range(s(100))]
            time.sleep(1)
            for p in ps:
                p.send_signal(signal.SIGSTOP)  # never reads again
            return lambda: (b.end_all(), b.kill(job), "")[2]
        run("attach", attach, 8)

        def auto_on():
            filler = ["x" * 399] * 4750  # ~1.9 MB of command line
            jobs = [b.submit("--", b.child, *filler, "repeat:100000000:auto on")
                    for _ in range(s(3))]
            return lambda: ([b.kill(j) for j in jobs], "")[1]
        run("auto-on", auto_on, 8)

        def connect():
            pids = []
            for _ in range(2):
                pid = os.fork()
                if pid == 0:
                    as_user(*b.a)()
                    while True:
                        try:
                            c = socket.socket(socket.AF_UNIX)
                            c.connect(b.sock)
                            c.close()
                        except OSError:
                            pass
                pids.append(pid)

            def stop():
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                return ""
            return stop
        run("connect", connect, 2)

        def etcd_kill():
            jobs = [b.submit("--nnodes", "2", "--rdzv", "etcd://127.0.0.1:1", "--rdzv-timeout",
                             "8760h", "--grace", "2s", "--", b.child, "hang") for _ in range(s(5))]
            time.sleep(2)

            def stop():
                # Each job's supervisor, from its own kill's answer to its end.
                outlived = []
                for j in jobs:
                    if not j:
                        continue
                    b.ctl(b.a, "kill", j)
                    t0 = time.time()
                    while shims_of(j) and time.time() - t0 < 30:
                        time.sleep(0.02)
                    outlived.append(time.time() - t0)
                left = sum(shims_of(j) for j in jobs if j)
                return (f" shims_left={left} outlived_kill_max={max(outlived):.2f}s "
                        f"median={statistics.median(outlived):.2f}s (grace 2s)")
            return stop
        run("etcd-kill", etcd_kill, 0.5)

        def metrics_halfopen():
            pid = os.fork()
            if pid == 0:
                # A's: 100 half-open requests, each opened again once closed.
                as_user(*b.a)()
                held = []
                while True:
                    held = [c for c in held if c.fileno() >= 0]
                    while len(held) < s(100):
                        try:
                            c = socket.create_connection(b.metrics, timeout=1)
                            c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                            c.setblocking(False)
                            held.append(c)
                        except OSError:
                            break
                    for c in list(held):
                        try:
                            if c.recv(1) == b"":
                                c.close()
                                held.remove(c)
                        except BlockingIOError:
                            pass
                        except OSError:
                            c.close()
                            held.remove(c)
                    time.sleep(0.05)

            def stop():
                took = [scrape_ms(b.metrics) for _ in range(5)]
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                got = [t for t in took if t is not None]
                return (f" scrapes_answered={len(got)}/5 scrape_max="
                        f"{max(got) if got else float('nan'):.1f}ms")
            return stop
        if b.metrics:
            run("metrics-halfopen", metrics_halfopen, 2)

        def sparse_errors():
            before = du_bytes(f"{b.dir}/state")
            jobs = [b.submit("--", "/bin/sh", "-c",
                             'truncate -s 20G "$(dirname "$TORCHELASTIC_ERROR_FILE")/holes"; '
                             'exit 1') for _ in range(s(4))]
            t0 = time.time()

            def stop():
                for j in jobs:
                    if j:
                        b.ctl(b.a, "wait", j, timeout=600)
                grown = du_bytes(f"{b.dir}/state") - before
                return (f" jobs_ended_in={time.time() - t0:.1f}s "
                        f"state_dir_grew={grown / 2**20:.1f}MiB (20G of holes each)")
            return stop
        run("sparse-errors", sparse_errors, 0.5)
        fs = os.path.join(args.build, "tests", "lt_hang_fs")
        for name in ("stuck", "late"):
            if only and f"{name}-mount" not in only:
                continue
            if not os.path.exists(fs) or not os.path.exists("/dev/fuse"):
                print(f"{name}-mount  skipped: no {fs} or no /dev/fuse")
                continue
            run(f"{name}-mount", lambda name=name: HangMount(b, fs).attack(name), 2)
        print(f"idle ps median {idle:.1f} ms; target: every attack's under {3 * idle:.1f} ms")
        if not only or "memory" in only:
            memory(b, s(50))
    finally:
        b.stop()


if __name__ == "__main__":
    main()
