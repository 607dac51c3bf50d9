#!/usr/bin/python3
"""Core benchmark of ltd: how fast jobs start, fail, hang and end.

Prints medians (and spread) of:
  1. end to end: `ltctl submit --devices 8 -- /bin/true`, submit to exit;
  2. failure to teardown: one rank of 8 exits 1, the others wait; the time
     from that exit (as ltd saw it) until every rank is reaped and nothing
     of the job is left (the job's `ended_at`);
  3. hang detection: a rank stops beating under --heartbeat-timeout; the
     time from its deadline to the hang verdict and to the teardown start
     (with --stack-budget 0: no stacks taken);
  4. ltd's CPU and RSS while 1,000 ranks each beat 10 times a second;
  5. the C runtime's cost of one lt_heartbeat_step call (bench/hb_cost).
With torchrun installed (Debian's python3-torch), the same workloads of 1
and 2 under `torchrun --no-python --nproc_per_node 8`, and the ratios.

Not a test: nothing is asserted; a shared 2-core machine is noisy.
Usage: bench/core_bench.py [--build DIR] [--runs N] [--ranks N]
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def parse_time(text):
    """RFC 3339 as protobuf's JSON mapping writes it: `Z` and 0, 3, 6 or 9
    fractional digits (older Pythons' fromisoformat takes only 3 or 6)."""
    whole, _, frac = text.rstrip("Z").partition(".")
    seconds = datetime.datetime.fromisoformat(whole + "+00:00").timestamp()
    return seconds + (int(frac) / 10 ** len(frac) if frac else 0.0)


def median_line(name, values, unit="ms", scale=1000.0):
    vals = sorted(v * scale for v in values)
    if not vals:
        print(f"{name:<48} no data")
        return None
    med = statistics.median(vals)
    print(f"{name:<48} median {med:9.2f} {unit}  (min {vals[0]:.2f}, max {vals[-1]:.2f}, n={len(vals)})")
    return med


class Ltd:
    def __init__(self, build, devices, extra=()):
        self.build = build
        self.dir = tempfile.mkdtemp(prefix="ltd-bench.")
        self.sock = os.path.join(self.dir, "ltd.sock")
        self.log = open(os.path.join(self.dir, "ltd.log"), "w")
        self.proc = subprocess.Popen(
            [f"{build}/daemon/ltd", "--socket", self.sock, "--state-dir", f"{self.dir}/state",
             "--devices", str(devices), "--log-level", "warn", *extra],
            stdout=self.log, stderr=self.log)
        deadline = time.time() + 10
        while not os.path.exists(self.sock):
            if time.time() > deadline or self.proc.poll() is not None:
                sys.exit(f"ltd did not start; see {self.dir}/ltd.log")
            time.sleep(0.01)

    def ctl(self, *args, check=True):
        r = subprocess.run([f"{self.build}/client/ltctl", "--socket", self.sock, *args],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
        if check and r.returncode not in (0,):
            raise RuntimeError(f"ltctl {' '.join(args)}: {r.returncode} {r.stderr}")
        return r

    def show(self, job):
        return json.loads(self.ctl("--json", "show", job).stdout)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def bench_submit(ltd, runs):
    times = []
    ltd.ctl("submit", "--devices", "8", "--", "/bin/true")  # warm the page cache
    for _ in range(runs):
        t0 = time.perf_counter()
        ltd.ctl("submit", "--devices", "8", "--", "/bin/true")
        times.append(time.perf_counter() - t0)
    return median_line("ltd: submit --devices 8 /bin/true, end to end", times)


def bench_teardown(ltd, child, runs):
    times = []
    for _ in range(runs):
        job = ltd.ctl("submit", "-d", "--devices", "8", "--", child, "--rank", "0",
                      "sleep:200,exit:1", "hang").stdout.strip()
        ltd.ctl("wait", job, check=False)
        j = ltd.show(job)
        times.append(parse_time(j["ended_at"]) - parse_time(j["root_cause"]["at"]))
    return median_line("ltd: failure to every rank reaped (8 ranks)", times)


def bench_hang(ltd, child, runs):
    detect, teardown = [], []
    for _ in range(runs):
        job = ltd.ctl("submit", "-d", "--devices", "2", "--heartbeat-timeout", "300ms", "--", child,
                      "--rank", "1", "beat:3:10,hang", "beat:1000000:50").stdout.strip()
        ltd.ctl("wait", job, check=False)
        j = ltd.show(job)
        rank = j["ranks"][1]
        deadline = parse_time(rank["last_heartbeat_at"]) + 0.3
        detect.append(parse_time(j["root_cause"]["at"]) - deadline)
        teardown.append(parse_time(j["teardown_at"]) - deadline)
    median_line("ltd: hang deadline passed to verdict", detect)
    return median_line("ltd: hang deadline passed to teardown started", teardown)


def bench_stopped_rank(build, runs=3):
    """A real 4-rank DDP job whose rank 1 is SIGSTOPped: stop to job end."""
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    env = dict(os.environ, PYTHONPATH=os.path.join(root, "worker_runtime", "python"))
    ltd = Ltd(build, 4)
    times = []
    try:
        for _ in range(runs):
            r = subprocess.run([f"{build}/client/ltctl", "--socket", ltd.sock, "submit", "-d", "--devices", "4",
                                "--heartbeat-timeout", "5s", "--grace", "5s", "--", "/usr/bin/python3",
                                os.path.join(root, "tests", "ranks", "ddp_hang.py"), "--steps", "100000",
                                "--stop-rank", "1", "--hang-step", "5"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=60)
            job = r.stdout.strip()
            ltd.ctl("wait", job, check=False)
            j = ltd.show(job)
            stopped_at = parse_time(j["ranks"][1]["last_heartbeat_at"])  # it beat, then stopped itself
            times.append(parse_time(j["ended_at"]) - stopped_at)
    finally:
        ltd.stop()
    return median_line("ltd: DDP rank SIGSTOPped -> job ended (timeout 5s)", times)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def bench_many_ranks(build, child, ranks, seconds):
    ltd = Ltd(build, ranks, ["--stack-budget", "0"])
    try:
        rss_idle = rss_mib(ltd.proc.pid)
        job = ltd.ctl("submit", "-d", "--devices", str(ranks), "--heartbeat-timeout", "30s", "--", child,
                      "beat:1000000:100").stdout.strip()  # killed below
        deadline = time.time() + 120
        while time.time() < deadline:
            j = ltd.show(job)
            if sum(1 for r in j["ranks"] if r["last_step"] is not None and r["last_step"] >= 5) == ranks:
                break
            time.sleep(0.5)
        c0, t0 = cpu_seconds(ltd.proc.pid), time.time()
        time.sleep(seconds)
        c1, t1 = cpu_seconds(ltd.proc.pid), time.time()
        rss = rss_mib(ltd.proc.pid)
        j = ltd.show(job)
        rate = statistics.median(r["steps_per_second"] for r in j["ranks"])
        print(f"{'ltd: ' + str(ranks) + ' ranks beating, CPU of one core':<48} {100 * (c1 - c0) / (t1 - t0):9.2f} %"
              f"  (median rank rate {rate:.1f} beats/s over {seconds:.0f} s)")
        print(f"{'ltd: RSS idle -> with ' + str(ranks) + ' ranks':<48} {rss_idle:9.1f} -> {rss:.1f} MiB")
        ltd.ctl("kill", job)
        ltd.ctl("wait", job, check=False)
    finally:
        ltd.stop()


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def bench_attached_memory(build, child, jobs=6, ranks=4, mib_per_rank=2.7):
    """Slow attached clients of chatty jobs: ltd's memory stays bounded."""
    ltd = Ltd(build, jobs * ranks, ["--stack-budget", "0"])
    go = os.path.join(ltd.dir, "go")
    lines = int(mib_per_rank * 1024 * 1024 / 22)  # "line N of M" is about 22 bytes
    clients = []
    try:
        rss_idle = status_kib(ltd.proc.pid, "VmRSS") / 1024
        ids = [ltd.ctl("submit", "-d", "--devices", str(ranks), "--", child, f"waitfile:{go},print:{lines},exit:0")
               .stdout.strip() for _ in range(jobs)]
        for job in ids:
            # stdout is a pipe nobody reads for a while: a slow terminal.
            clients.append(subprocess.Popen([f"{build}/client/ltctl", "--socket", ltd.sock, "attach", job],
                                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
        time.sleep(1)  # the clients attach
        open(go, "w").close()
        peak = 0
        deadline = time.time() + 120
        while time.time() < deadline:
            peak = max(peak, status_kib(ltd.proc.pid, "VmRSS"))
            states = [ltd.show(j)["state"] for j in ids]
            if all(s != "RUNNING" for s in states):
                break
            time.sleep(0.2)
        got = 0
        for c in clients:
            got += len(c.communicate(timeout=120)[0])
        time.sleep(0.5)
        rss_after = status_kib(ltd.proc.pid, "VmRSS") / 1024
        hwm = status_kib(ltd.proc.pid, "VmHWM") / 1024
        print(f"{'ltd: RSS, ' + str(jobs) + ' slow attached clients of ' + str(jobs * ranks) + ' chatty ranks':<48}"
              f" {rss_idle:9.1f} -> peak {hwm:.1f} -> after {rss_after:.1f} MiB"
              f"  ({jobs * ranks} x {mib_per_rank} MiB printed, {got / 2**20:.1f} MiB reached the clients)")
        return hwm
    finally:
        for c in clients:
            if c.poll() is None:
                c.kill()
                c.wait()
        ltd.stop()


def torchrun_no_python_flag():
    # torchrun 1.x spells it --no_python; 2.x accepts --no-python too.
    help_text = subprocess.run(["torchrun", "--help"], stdout=subprocess.PIPE, text=True).stdout
    return "--no-python" if "--no-python" in help_text else "--no_python"


def torchrun(*args, log_dir):
    # Debian 12's torchrun (torch 1.13 on Python 3.11) cannot parse the
    # default --redirects/--tee "0" (a Flag enum quirk) and crashes; "1"
    # (stdout to a log file, teed) parses, and ltd logs output too.
    return ["torchrun", torchrun_no_python_flag(), "--nproc_per_node", "8", "--redirects", "1", "--tee", "1",
            "--log_dir", log_dir, *args]


def torchrun_true(runs):
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as logs:
            t0 = time.perf_counter()
            subprocess.run(torchrun("/bin/true", log_dir=logs), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=True)
            times.append(time.perf_counter() - t0)
    return median_line("torchrun: --nproc_per_node 8 /bin/true", times)


def torchrun_teardown(runs):
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        stamp = os.path.join(tmp, "failed-at")
        script = os.path.join(tmp, "rank.sh")
        with open(script, "w") as f:
            f.write(f"#!/bin/sh\nif [ \"$RANK\" = 0 ]; then sleep 0.2; date +%s.%N > {stamp}; exit 1; fi\n"
                    "exec sleep 600\n")
        os.chmod(script, 0o755)
        for _ in range(runs):
            subprocess.run(torchrun(script, log_dir=os.path.join(tmp, "logs")), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            shutil.rmtree(os.path.join(tmp, "logs"), ignore_errors=True)
            end = time.time()
            with open(stamp) as f:
                times.append(end - float(f.read()))
    return median_line("torchrun: failure to torchrun exit (8 ranks)", times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--torchrun-runs", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=10)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    child = f"{build}/tests/lt_test_child"

    ltd = Ltd(build, 8, ["--stack-budget", "0"])
    try:
        submit = bench_submit(ltd, args.runs)
        teardown = bench_teardown(ltd, child, args.runs)
        bench_hang(ltd, child, max(5, args.runs // 2))
    finally:
        ltd.stop()
    if args.ranks > 0:
        bench_many_ranks(build, child, args.ranks, args.seconds)
    bench_attached_memory(build, child)
    if shutil.which("python3") and subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                                                  stderr=subprocess.DEVNULL).returncode == 0:
        bench_stopped_rank(build)
    hb = f"{build}/bench/hb_cost"
    if os.path.exists(hb):
        subprocess.run([hb], check=False)
    if shutil.which("torchrun"):
        tr = torchrun_true(args.torchrun_runs)
        print(f"{'ratio torchrun / ltd, end to end':<48} {tr / submit:9.1f} x")
        trd = torchrun_teardown(args.torchrun_runs)
        print(f"{'ratio torchrun / ltd, failure to teardown':<48} {trd / teardown:9.1f} x")
    else:
        print("torchrun not installed: no comparison (apt-get install python3-torch)")


if __name__ == "__main__":
    main()
