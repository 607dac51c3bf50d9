#!/usr/bin/python3
"""Containment benchmark: how fast, and how completely, ltd tears jobs down.

1. Teardown time, per containment mode: a 2-rank job whose rank 0 has
   three grandchildren that escaped (setsid + double fork, SIGTERM and
   SIGHUP ignored). The benchmark SIGKILLs rank 1 (the triggering failure)
   and times until no process of the job is left in /proc, and until
   `ltctl wait` reports the job ended. Median and spread over --runs.
2. Soak, per mode: --jobs jobs of 2-4 ranks with random faults (exit codes,
   segfaults, escapees, SIGTERM ignored, SIGSTOP, 20 children, closed
   stdout, cancels, hangs), --parallel at a time. Reports leftovers (must
   be 0), zombies (0), leftover job cgroups (0), and ltd's fd count and RSS
   before and after.

Not a test: timings on a shared 2-core machine vary; nothing is asserted
except that the soak leaves nothing behind (exit status 1 if it does).

Usage: bench/containment_bench.py [--build DIR] [--modes cgroup,subreaper]
                                  [--runs N] [--jobs N] [--parallel N]
"""

import argparse
import concurrent.futures
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time


def proc_pids():
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def read(path, mode="r"):
    try:
        with open(path, mode) as f:
            return f.read()
    except OSError:
        return None


def state_of(pid):
    stat = read(f"/proc/{pid}/stat")
    if not stat:
        return None, None
    rest = stat[stat.rfind(")") + 2:].split()
    return rest[0], int(rest[1])  # state, ppid


def marked(marker):
    """Live (non-zombie) processes whose environment holds `marker`."""
    needle = marker.encode()
    found = []
    for pid in proc_pids():
        env = read(f"/proc/{pid}/environ", "rb")
        if env and needle in env.split(b"\0"):
            state, _ = state_of(pid)
            if state not in (None, "Z", "X"):
                found.append(pid)
    return found


def zombies_of(parent):
    return [p for p in proc_pids() if state_of(p) == ("Z", parent)]


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid):
    for line in (read(f"/proc/{pid}/status") or "").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


def wait_for(pred, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.002)
    return pred()


class Ltd:
    def __init__(self, build, mode, devices):
        self.build = build
        self.mode = mode
        self.dir = tempfile.mkdtemp(prefix="ltdbench.")
        self.socket = os.path.join(self.dir, "ltd.sock")
        self.log_path = os.path.join(self.dir, "ltd.log")
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [f"{build}/daemon/ltd", "--socket", self.socket, "--state-dir",
             os.path.join(self.dir, "state"), "--devices", str(devices),
             "--containment", mode, "--log-level", "info"],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        # The socket answers before containment is set up; a job's answer
        # means ltd is fully up (and has done its one-time allocations).
        if not wait_for(lambda: os.path.exists(self.socket), 10):
            raise RuntimeError("ltd did not start:\n" + self.log())
        r = self.ctl(["submit", "--devices", "1", "--", "/bin/true"], timeout=20)
        if r.returncode != 0:
            raise RuntimeError(f"warm-up job failed: {r.stderr}\n{self.log()}")
        self.run_dir = ""
        for line in self.log().splitlines():
            if "jobs under " in line:
                self.run_dir = line.split("jobs under ", 1)[1].strip()

    def log(self):
        return read(self.log_path) or ""

    def ctl(self, args, env=None, timeout=60):
        full_env = dict(os.environ)
        full_env.update(env or {})
        return subprocess.run([f"{self.build}/client/ltctl", "--socket", self.socket] + args,
                              env=full_env, capture_output=True, text=True, timeout=timeout)

    def show(self, job):
        r = self.ctl(["--json", "show", job])
        return json.loads(r.stdout) if r.returncode == 0 else None

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def teardown_times(build, child, mode, runs):
    ltd = Ltd(build, mode, devices=4)
    gone_ms, ended_ms = [], []
    try:
        for run in range(runs):
            marker = f"LT_BENCH_TAG={os.getpid()}-{mode}-{run}"
            pidfile = os.path.join(ltd.dir, f"pids.{run}")
            r = ltd.ctl(["submit", "-d", "--devices", "2", "--grace", "10s", "--", child,
                         "--rank", "0", f"pidfile:{pidfile},escape,escape,escape,hang", "hang"],
                        env={"LT_BENCH_TAG": marker.split("=", 1)[1]})
            job = r.stdout.strip()
            if r.returncode != 0 or not wait_for(
                    lambda: len((read(pidfile) or "").split()) == 4, 10):
                raise RuntimeError(f"job did not come up: {r.stderr}")
            show = ltd.show(job)
            rank1 = next(x["pid"] for x in show["ranks"] if x["rank"] == 1)
            waiter = subprocess.Popen([f"{build}/client/ltctl", "--socket", ltd.socket, "wait",
                                       job], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            time.sleep(0.05)  # let `wait` connect before the clock starts
            t0 = time.monotonic()
            os.kill(rank1, signal.SIGKILL)
            if not wait_for(lambda: not marked(marker), 30):
                raise RuntimeError(f"{mode}: job {job} not gone after 30 s")
            gone_ms.append((time.monotonic() - t0) * 1000)
            waiter.wait(timeout=30)
            ended_ms.append((time.monotonic() - t0) * 1000)
    finally:
        ltd.stop()
    return gone_ms, ended_ms


FAULTS = ["clean", "exit", "segv", "escape", "ignore-term", "stop", "children", "close-stdout",
          "cancel", "hang"]
WEIGHTS = [14, 14, 10, 14, 10, 8, 10, 8, 10, 2]


EXPECTED_EXIT = {"clean": 0, "segv": 139, "escape": 1, "ignore-term": 2, "stop": 3,
                 "children": 4, "close-stdout": 0, "cancel": 130, "hang": 124}


def fault_job(child, fault, ranks, rng, pid_dir, n):
    """Returns (submit options, argv, ms after which to cancel or None,
    the exit code the job must end with)."""
    code = 0
    ms = rng.randint(0, 150)
    bad = rng.randrange(ranks)
    opts = ["--devices", str(ranks), "--grace", "300ms"]
    per_rank = {}
    default = "hang"
    cancel = None
    if fault == "clean":
        default = f"print:3,sleep:{ms},exit:0"
    elif fault == "exit":
        code = rng.randint(1, 120)
        per_rank[bad] = f"sleep:{ms},exit:{code}"
    elif fault == "segv":
        per_rank[bad] = f"sleep:{ms},signal:11"
    elif fault == "escape":
        per_rank[bad] = f"pidfile:{pid_dir}/{n},escape,escape,sleep:{ms},exit:1"
    elif fault == "ignore-term":
        default = "ignore-term,hang"
        per_rank[bad] = f"sleep:{ms},exit:2"
    elif fault == "stop":
        default = "stop"
        per_rank[bad] = f"sleep:{ms},exit:3"
    elif fault == "children":
        per_rank[bad] = f"fork:20,sleep:{ms},exit:4"
    elif fault == "close-stdout":
        default = f"close-stdout,sleep:{ms},exit:0"
    elif fault == "cancel":
        default = "escape,hang"
        cancel = ms
    elif fault == "hang":
        opts += ["--heartbeat-timeout", "200ms"]
        default = "beat:1:0,hang"
    argv = [child]
    for rank, actions in per_rank.items():
        argv += ["--rank", str(rank), actions]
    argv.append(default)
    return opts, argv, cancel, code if fault == "exit" else EXPECTED_EXIT[fault]


def soak(build, child, mode, jobs, parallel, seed):
    ltd = Ltd(build, mode, devices=4 * parallel)
    marker_value = f"soak-{os.getpid()}-{mode}"
    marker = f"LT_BENCH_TAG={marker_value}"
    pid_dir = os.path.join(ltd.dir, "pids")
    os.mkdir(pid_dir)
    rng = random.Random(seed)
    plan = [(n, rng.choices(FAULTS, WEIGHTS)[0], rng.randint(2, 4)) for n in range(jobs)]
    before = (fd_count(ltd.proc.pid), rss_kib(ltd.proc.pid))
    outcomes = {}

    def one(item):
        n, fault, ranks = item
        job_rng = random.Random(seed * 100003 + n)
        opts, argv, cancel, expected = fault_job(child, fault, ranks, job_rng, pid_dir, n)
        r = ltd.ctl(["submit", "-d"] + opts + ["--"] + argv, env={"LT_BENCH_TAG": marker_value})
        if r.returncode != 0:
            return fault, f"submit failed: {r.stderr.strip()}"
        job = r.stdout.strip()
        if cancel is not None:
            time.sleep(cancel / 1000)
            ltd.ctl(["kill", job])
        w = ltd.ctl(["wait", job], timeout=120)
        return fault, "as injected" if w.returncode == expected else f"exit {w.returncode}"

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
        for fault, result in pool.map(one, plan):
            outcomes.setdefault(fault, {}).setdefault(result, 0)
            outcomes[fault][result] += 1
    elapsed = time.monotonic() - t0
    # Every job is reported ended, so nothing of any may be left right now.
    leftovers = marked(marker)
    zombies = zombies_of(ltd.proc.pid)
    job_cgroups = []
    if ltd.run_dir and os.path.isdir(ltd.run_dir):
        job_cgroups = [d for d in os.listdir(ltd.run_dir) if d.startswith("job-")]
    # ltd closes a client's connection a moment after the client is gone.
    wait_for(lambda: fd_count(ltd.proc.pid) <= before[0], 5)
    after = (fd_count(ltd.proc.pid), rss_kib(ltd.proc.pid))
    ltd.stop()
    subtree_left = bool(ltd.run_dir) and os.path.exists(ltd.run_dir)
    for pid in leftovers:
        os.kill(pid, signal.SIGKILL)
    return {
        "jobs": jobs, "elapsed_s": elapsed, "leftovers": len(leftovers), "zombies": len(zombies),
        "job_cgroups_left": len(job_cgroups), "subtree_left_after_stop": subtree_left,
        "fds_before": before[0], "fds_after": after[0], "rss_kib_before": before[1],
        "rss_kib_after": after[1], "outcomes": outcomes,
    }


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("LTD_BUILD", os.path.join(here, "..", "build")))
    ap.add_argument("--modes", default="cgroup,subreaper")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--parallel", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-soak", action="store_true")
    args = ap.parse_args()
    # A private copy, laid out like the build tree (helpers beside ltd), so
    # that a rebuild in the shared build dir cannot pull binaries away
    # mid-run.
    snapshot = tempfile.mkdtemp(prefix="ltdbench-bin.")
    for rel in ("daemon/ltd", "daemon/lt-exec", "daemon/lt-guardian", "client/ltctl",
                "tests/lt_test_child"):
        src = os.path.join(args.build, rel)
        if not os.access(src, os.X_OK):
            sys.exit(f"{src} is missing; build ltd, ltctl, lt-exec, lt-guardian and "
                     f"lt_test_child in {args.build} first (run from {here})")
        os.makedirs(os.path.join(snapshot, os.path.dirname(rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(snapshot, rel))
    args.build = snapshot
    child = os.path.join(snapshot, "tests", "lt_test_child")
    modes = args.modes.split(",")
    ok = True

    print(f"== Teardown: SIGKILL to rank 1 -> nothing of the job left "
          f"(rank 0 has 3 escaped grandchildren), {args.runs} runs")
    medians = {}
    for mode in modes:
        gone, ended = teardown_times(args.build, child, mode, args.runs)
        medians[mode] = statistics.median(gone)
        print(f"{mode:10s} nothing left: median {statistics.median(gone):7.1f} ms  "
              f"min {min(gone):6.1f}  max {max(gone):6.1f}   |   `ltctl wait` returned: "
              f"median {statistics.median(ended):7.1f} ms")
    if len(modes) == 2:
        a, b = modes
        print(f"ratio {b}/{a} (nothing left): {medians[b] / medians[a]:.2f}")

    if not args.skip_soak:
        for mode in modes:
            print(f"\n== Soak ({mode}): {args.jobs} jobs of 2-4 ranks, random faults, "
                  f"{args.parallel} at a time")
            r = soak(args.build, child, mode, args.jobs, args.parallel, args.seed)
            print(f"elapsed {r['elapsed_s']:.1f} s ({r['jobs'] / r['elapsed_s']:.1f} jobs/s)")
            print(f"leftover processes {r['leftovers']}   zombies under ltd {r['zombies']}   "
                  f"job cgroups left {r['job_cgroups_left']}   subtree left after stop "
                  f"{r['subtree_left_after_stop']}")
            print(f"ltd fds {r['fds_before']} -> {r['fds_after']}   "
                  f"RSS {r['rss_kib_before']} KiB -> {r['rss_kib_after']} KiB")
            for fault in FAULTS:
                if fault in r["outcomes"]:
                    codes = ", ".join(f"{k}: {v}" for k, v in
                                      sorted(r["outcomes"][fault].items(), key=str))
                    print(f"  {fault:13s} {codes}")
            if r["leftovers"] or r["zombies"] or r["job_cgroups_left"] or \
                    r["subtree_left_after_stop"]:
                ok = False
    shutil.rmtree(snapshot, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
