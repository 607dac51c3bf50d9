#!/usr/bin/python3
"""Per-job supervisors (lt-shim): what they cost and how fast ltd re-attaches.

Prints, side by side with `ltctl ps` (one bare RPC) in the same run:
  1. submit-to-exit of `ltctl submit --devices 8 -- /bin/true`, as root
     and as a user (every rank then drops to that user), and where the
     time goes (from the job's record: queue and supervisor start, ranks,
     end; CPU by part);
  2. crash teardown: one rank of 8 exits 1; from the supervisor seeing
     that exit (the root cause's time) to every rank reaped (ended_at);
  3. CPU of ltd plus the supervisor for 1,000 ranks beating 10 times a
     second;
  4. the memory one supervisor adds while idle (Private_Dirty of
     /proc/PID/smaps_rollup: shared library pages do not count), and ltd's;
  5. ltd SIGKILLed under 100 running jobs and started again: the time
     until `ps` shows all 100 RUNNING with the same pids (adopted);
  6. CPU of ltd and the supervisor while one job of 8 ranks prints 1,000
     lines a second each and nobody attaches (its supervisor sends ltd no
     output then; before SetOutput it sent every line);
  7. with --baseline BUILD (another build of ltd, e.g. the release before
     per-job supervisors): submit-to-exit of both builds, alternately, and
     the ratio, for a target set on another machine.

Not a test: nothing is asserted; a shared 2-core machine is noisy.
Usage: bench/supervisor_bench.py [--build DIR] [--runs N] [--ranks N] [--jobs N]
                                 [--print-windows N] [--only-print] [--baseline BUILD]
"""

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_bench import Ltd, cpu_seconds, median_line, parse_time  # noqa: E402


def kib(pid, key, path="smaps_rollup"):
    try:
        with open(f"/proc/{pid}/{path}") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def self_and_reaped_cpu(pid):
    """CPU seconds of `pid` itself, and of its children it reaped (for ltd:
    the supervisors, with the ranks they reaped)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def supervisors(state_dir, spare=False):
    """pid of every job's lt-shim on `state_dir`, or of its spare (whose
    --job is a placeholder of '_' until it has a job)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as f:
                if f.read().strip() != "lt-shim":
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
                if state_dir.encode() not in cmdline or (b"--job\0_" in cmdline) != spare:
                    continue
        except OSError:
            continue
        pids.append(int(entry))
    return pids


class WindowLtd(Ltd):
    """An ltd whose jobs outlive it (the default restore window)."""

    def __init__(self, build, devices, extra=()):
        self.extra = ["--restore-window", "10m", *extra]
        self.devices = devices
        super().__init__(build, devices, self.extra)

    def restart(self):
        log = open(os.path.join(self.dir, "ltd.log"), "a")
        self.proc = subprocess.Popen(
            [f"{self.build}/daemon/ltd", "--socket", self.sock, "--state-dir", f"{self.dir}/state",
             "--devices", str(self.devices), "--log-level", "warn", *self.extra], stdout=log, stderr=log)

    def stop(self):
        # Every job ends first: nothing of the bench outlives it.
        if self.proc.poll() is None:
            self.ctl("shutdown", check=False)
            self.proc.wait(timeout=120)
        super().stop()


NOBODY = 65534  # a user's jobs: ltd drops to that user (and its groups) for every rank


def ctl_as(ltd, uid, *args):
    """`ltctl ARGS` as `uid` (None: as this process, root), from /."""
    ids = {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}
    r = subprocess.run([f"{ltd.build}/client/ltctl", "--socket", ltd.sock, *args], cwd="/",
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300, **ids)
    if r.returncode != 0:
        raise RuntimeError(f"ltctl {' '.join(args)}: {r.returncode} {r.stderr}")
    return r


def bench_ps_and_submit(ltd, runs):
    ps = []
    for _ in range(runs):
        t0 = time.perf_counter()
        ltd.ctl("ps")
        ps.append(time.perf_counter() - t0)
    median_line("ltctl ps (one bare RPC)", ps)
    os.chmod(ltd.dir, 0o711)  # a user may reach the socket
    for who, uid in (("root", None), ("a user (nobody)", NOBODY)):
        total, queue, ranks = [], [], []
        ctl_as(ltd, uid, "submit", "--devices", "8", "--", "/bin/true")  # warm the page cache
        time.sleep(1)  # ltd's spare supervisor is ready
        first = len(json.loads(ltd.ctl("--json", "ps", "-a").stdout))
        ctl0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        own0, reaped0 = self_and_reaped_cpu(ltd.proc.pid)
        for _ in range(runs):
            time.sleep(0.3)  # the next spare is ready: it starts at idle priority
            t0 = time.perf_counter()
            ctl_as(ltd, uid, "submit", "--devices", "8", "--", "/bin/true")
            total.append(time.perf_counter() - t0)
        ctl1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        time.sleep(0.5)  # the last supervisor exits and is reaped
        own1, reaped1 = self_and_reaped_cpu(ltd.proc.pid)
        for j in json.loads(ltd.ctl("--json", "ps", "-a").stdout)[first:]:
            queue.append(parse_time(j["started_at"]) - parse_time(j["submitted_at"]))
            ranks.append(parse_time(j["ended_at"]) - parse_time(j["started_at"]))
        median_line(f"submit 8 x /bin/true as {who}, end to end", total)
        median_line("  of which submit -> supervisor up, ranks start", queue)
        median_line("  of which 8 ranks start, run, reaped, recorded", ranks)
        ctl_cpu = (ctl1.ru_utime + ctl1.ru_stime - ctl0.ru_utime - ctl0.ru_stime) / runs
        print(f"{'  CPU per job: ltctl, ltd, supervisor + ranks':<48} {ctl_cpu * 1000:6.1f} + "
              f"{(own1 - own0) / runs * 1000:.1f} + {(reaped1 - reaped0) / runs * 1000:.1f} ms"
              f"  (means; the last includes each supervisor's start, spent while it was a spare)")


def submit_medians(ltd, runs):
    """Median submit-to-exit of `--devices 8 -- /bin/true` on a started ltd."""
    ltd.ctl("submit", "--devices", "8", "--", "/bin/true")  # warm the page cache
    time.sleep(1)
    times = []
    for _ in range(runs):
        time.sleep(0.3)  # as above: a spare supervisor is ready, where there are spares
        t0 = time.perf_counter()
        ltd.ctl("submit", "--devices", "8", "--", "/bin/true")
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_against(baseline, build, runs, rounds=3):
    """Submit-to-exit of `baseline` and of this build, in turns: the VM's
    drift between runs (some 10 ms) then hits both alike."""
    medians = {"baseline": [], "this build": []}
    for _ in range(rounds):
        for name in medians:
            # An ltd of a release before --restore-window takes the plain flags.
            ltd = Ltd(baseline, 8) if name == "baseline" else WindowLtd(build, 8, ["--stack-budget", "0"])
            try:
                medians[name].append(submit_medians(ltd, runs))
            finally:
                ltd.stop()
    for name, values in medians.items():
        print(f"{'submit 8 x /bin/true, ' + name:<48} " +
              ", ".join(f"{v * 1000:.1f}" for v in values) + f" ms  (medians of {rounds} runs of {runs})")
    ratio = statistics.median(medians["this build"]) / statistics.median(medians["baseline"])
    print(f"{'  this build / baseline':<48} {ratio:9.2f}")


def bench_teardown(ltd, child, runs):
    times = []
    for _ in range(runs):
        job = ltd.ctl("submit", "-d", "--devices", "8", "--", child, "--rank", "0",
                      "sleep:200,exit:1", "hang").stdout.strip()
        ltd.ctl("wait", job, check=False)
        j = ltd.show(job)
        times.append(parse_time(j["ended_at"]) - parse_time(j["root_cause"]["at"]))
    median_line("crash: supervisor sees the exit -> all 8 reaped", times)


def bench_memory(ltd, child):
    job = ltd.ctl("submit", "-d", "--devices", "1", "--", child, "hang").stdout.strip()
    deadline = time.time() + 30
    while ltd.show(job)["state"] != "RUNNING" and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(1.5)  # idle
    shims = supervisors(ltd.dir)
    dirty = [kib(p, "Private_Dirty") / 1024 for p in shims]
    rss = [kib(p, "VmRSS", "status") / 1024 for p in shims]
    print(f"{'supervisor idle: Private_Dirty (RSS)':<48} {statistics.median(dirty):9.2f} MiB"
          f"  ({statistics.median(rss):.1f} MiB RSS, mostly shared libraries)")
    spare = supervisors(ltd.dir, spare=True)
    if spare:
        print(f"{'the spare supervisor, waiting: Private_Dirty':<48} "
              f"{kib(spare[0], 'Private_Dirty') / 1024:9.2f} MiB")
    print(f"{'ltd: Private_Dirty (RSS)':<48} {kib(ltd.proc.pid, 'Private_Dirty') / 1024:9.2f} MiB"
          f"  ({kib(ltd.proc.pid, 'VmRSS', 'status') / 1024:.1f} MiB RSS)")
    ltd.ctl("kill", job)
    ltd.ctl("wait", job, check=False)


def bench_supervisor_death(ltd, child, runs):
    """SIGKILL a job's supervisor: its ranks (PDEATHSIG) and what they left
    (an escaped grandchild) go; the time until ltd has killed it all and
    recorded the job LOST."""
    times = []
    for _ in range(runs):
        pidfile = os.path.join(ltd.dir, "pids")
        if os.path.exists(pidfile):
            os.unlink(pidfile)
        job = ltd.ctl("submit", "-d", "--devices", "2", "--", child,
                      f"pidfile:{pidfile},escape,hang").stdout.strip()
        deadline = time.time() + 30
        while time.time() < deadline:
            if os.path.exists(pidfile) and len(open(pidfile).read().split()) == 4:
                break
            time.sleep(0.02)
        shim = [p for p in supervisors(ltd.dir) if f"--job\0{job}\0".encode() in
                open(f"/proc/{p}/cmdline", "rb").read()][0]
        t_kill = time.time()
        os.kill(shim, signal.SIGKILL)
        ltd.ctl("wait", job, check=False)
        j = ltd.show(job)
        times.append(parse_time(j["root_cause"]["at"]) - t_kill)
    median_line("supervisor SIGKILLed -> job killed, recorded LOST", times)


def bench_many_ranks(build, child, ranks, seconds):
    ltd = WindowLtd(build, ranks, ["--stack-budget", "0"])
    try:
        job = ltd.ctl("submit", "-d", "--devices", str(ranks), "--heartbeat-timeout", "30s", "--", child,
                      "beat:1000000:100").stdout.strip()
        deadline = time.time() + 180
        while time.time() < deadline:
            j = ltd.show(job)
            if sum(1 for r in j["ranks"] if r["last_step"] is not None and r["last_step"] >= 5) == ranks:
                break
            time.sleep(0.5)
        shim = supervisors(ltd.dir)[0]
        procs = [ltd.proc.pid, shim]
        c0, t0 = [cpu_seconds(p) for p in procs], time.time()
        time.sleep(seconds)
        c1, t1 = [cpu_seconds(p) for p in procs], time.time()
        dt = t1 - t0
        ltd_cpu, shim_cpu = (100 * (c1[i] - c0[i]) / dt for i in range(2))
        print(f"{str(ranks) + ' ranks at 10 Hz: ltd + supervisor CPU':<48} {ltd_cpu + shim_cpu:9.2f} %"
              f"  (ltd {ltd_cpu:.2f} %, supervisor {shim_cpu:.2f} % of one core)")
        ltd.ctl("kill", job)
        ltd.ctl("wait", job, check=False)
    finally:
        ltd.stop()


# 100 lines every 100 ms, flushed: 1,000 lines a second per rank.
PRINTER = ("import sys, time\n"
           "i = 0\n"
           "while True:\n"
           "    for _ in range(100):\n"
           "        print('rank output line', i, 'x' * 40)\n"
           "        i += 1\n"
           "    sys.stdout.flush()\n"
           "    time.sleep(0.1)\n")


def bench_unwatched_output(build, windows, seconds=2.0):
    ltd = WindowLtd(build, 8, ["--stack-budget", "0"])
    try:
        job = ltd.ctl("submit", "-d", "--devices", "8", "--", "/usr/bin/python3", "-c",
                      PRINTER).stdout.strip()
        deadline = time.time() + 60
        while time.time() < deadline and not supervisors(ltd.dir):
            time.sleep(0.1)
        time.sleep(2)  # the ranks' start is not part of it
        shim = supervisors(ltd.dir)[0]
        ltd_cpu, shim_cpu = [], []
        for _ in range(windows):
            c0, t0 = [cpu_seconds(p) for p in (ltd.proc.pid, shim)], time.time()
            time.sleep(seconds)
            c1, t1 = [cpu_seconds(p) for p in (ltd.proc.pid, shim)], time.time()
            ltd_cpu.append((c1[0] - c0[0]) / (t1 - t0))
            shim_cpu.append((c1[1] - c0[1]) / (t1 - t0))
        median_line("8 ranks x 1,000 lines/s, unwatched: ltd CPU", ltd_cpu, "%", 100.0)
        median_line("... the supervisor's CPU", shim_cpu, "%", 100.0)
        ltd.ctl("kill", job)
        ltd.ctl("wait", job, check=False)
    finally:
        ltd.stop()


def bench_reattach(build, child, jobs):
    ltd = WindowLtd(build, jobs, ["--stack-budget", "0"])
    try:
        ids = [ltd.ctl("submit", "-d", "--devices", "1", "--", child, "hang").stdout.strip()
               for _ in range(jobs)]
        deadline = time.time() + 300
        while time.time() < deadline:
            listed = json.loads(ltd.ctl("--json", "ps").stdout)
            if sum(1 for j in listed if j["state"] == "RUNNING" and j["ranks"][0]["pid"]) == jobs:
                break
            time.sleep(0.2)
        before = {j["id"]: j["ranks"][0]["pid"] for j in listed}
        ltd.proc.send_signal(signal.SIGKILL)
        ltd.proc.wait()
        os.unlink(ltd.sock)
        t0 = time.perf_counter()
        ltd.restart()
        while time.perf_counter() - t0 < 60:
            if os.path.exists(ltd.sock):
                r = ltd.ctl("--json", "ps", check=False)
                if r.returncode == 0:
                    listed = json.loads(r.stdout)
                    if sum(1 for j in listed if j["state"] == "RUNNING") == jobs:
                        break
            time.sleep(0.005)
        took = time.perf_counter() - t0
        same = sum(1 for j in listed if before.get(j["id"]) == j["ranks"][0]["pid"])
        print(f"{'ltd SIGKILLed, restarted: ' + str(jobs) + ' jobs re-attached':<48} {took * 1000:9.2f} ms"
              f"  (start to `ps` showing all RUNNING; {same}/{jobs} with the same pids)")
    finally:
        ltd.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--ranks", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--print-windows", type=int, default=15)
    ap.add_argument("--only-print", action="store_true", help="only the unwatched output line")
    ap.add_argument("--baseline", help="another build of ltd: compare submit-to-exit with it, and stop")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    child = f"{build}/tests/lt_test_child"
    if args.only_print:
        return bench_unwatched_output(build, args.print_windows)
    if args.baseline:
        return bench_against(os.path.abspath(args.baseline), build, args.runs)

    ltd = WindowLtd(build, 8, ["--stack-budget", "0"])
    try:
        bench_ps_and_submit(ltd, args.runs)
        bench_teardown(ltd, child, max(5, args.runs // 2))
        bench_memory(ltd, child)
        bench_supervisor_death(ltd, child, 5)
    finally:
        ltd.stop()
    if args.ranks > 0:
        bench_many_ranks(build, child, args.ranks, args.seconds)
    if args.jobs > 0:
        bench_reattach(build, child, args.jobs)
    if args.print_windows > 0:
        bench_unwatched_output(build, args.print_windows)


if __name__ == "__main__":
    main()
