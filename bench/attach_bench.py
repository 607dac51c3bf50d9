#!/usr/bin/python3
"""What an attached client costs and gets: rank lines through an attached
`ltctl submit` (which reads the job's log through ltd) and through `ltrun`,
into a file, against another build in turns (console_bench.py: the
client's own per-line path and --output files).

Prints, for a 2-rank job printing LINES lines per rank as fast as it can,
written to a file: the attached client's and ltd's CPU time per line that
reached the file, and those lines/s from submit to exit; quiet, and with
two processes spinning beside it (`sh -c 'while :; do :; done'`, a busy
machine). With --baseline-build, the same through another build's ltd and
ltctl (a build from before a change), in turns, and the ratios. An ltd
that drops lines for a client that falls behind shows it as fewer lines.

Not a test: nothing is asserted; a shared 2-core machine is noisy.
Usage: bench/attach_bench.py [--build DIR] [--baseline-build DIR] [--runs N]
                             [--lines N] [--modes quiet,hogs]
"""

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_bench import Ltd  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    """A process's CPU time so far (user + system), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def timed(argv, out_path, ltd_pid=None):
    """Wall time, the command's CPU time and ltd's over the run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    ltd_before = proc_cpu(ltd_pid) if ltd_pid else 0.0
    with open(out_path, "wb") as out:
        start = time.monotonic()
        r = subprocess.run(argv, stdout=out, stderr=subprocess.DEVNULL, timeout=900)
        took = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    ltd_cpu = proc_cpu(ltd_pid) - ltd_before if ltd_pid else 0.0
    if r.returncode != 0:
        sys.exit(f"{argv[0]} exited {r.returncode}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, cpu, ltd_cpu


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def report(name, rows):
    rates = sorted(r[0] for r in rows)
    cpus = sorted(r[1] for r in rows)
    ltds = sorted(r[2] for r in rows)
    reached = min(r[3] for r in rows)
    med = (statistics.median(rates), statistics.median(cpus), statistics.median(ltds))
    print(f"  {name:<16} client {med[1]:6.2f} us CPU/line (min {cpus[0]:.2f}, max {cpus[-1]:.2f})"
          f"  ltd {med[2]:6.2f} us/line  {med[0]:10,.0f} lines/s "
          f"(min {rates[0]:,.0f}, max {rates[-1]:,.0f}), lines reached >= {reached:.0%}, "
          f"n={len(rates)}")
    return med


def hogs(n):
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(n)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--baseline-build", default="")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--lines", type=int, default=100000)
    p.add_argument("--modes", default="quiet,hogs")
    p.add_argument("--ltd-args", default="", help="more arguments for this build's ltd")
    p.add_argument("--baseline-ltd-args", default="",
                   help="more arguments for the baseline's ltd (the same build: one build two ways)")
    args = p.parse_args()
    builds = {"this": os.path.abspath(args.build)}
    if args.baseline_build:
        builds["baseline"] = os.path.abspath(args.baseline_build)
    child = f"{builds['this']}/tests/lt_test_child"
    ltrun = next((f"{b}/daemon/ltrun" for b in builds.values() if os.path.exists(f"{b}/daemon/ltrun")),
                 None)
    ranks = 2
    tmp = tempfile.mkdtemp(prefix="console-bench.")
    out = os.path.join(tmp, "out.txt")
    extra = {"this": shlex.split(args.ltd_args), "baseline": shlex.split(args.baseline_ltd_args)}
    ltds = {name: Ltd(build, devices=4, extra=extra[name]) for name, build in builds.items()}
    print(f"{ranks} ranks x {args.lines:,} lines, submit to exit, into a file; CPU per line "
          f"that reached the file (ltrun's includes its ranks'):")
    try:
        for mode in args.modes.split(","):
            spinning = hogs(2 if mode == "hogs" else 0)
            rows = {name: [] for name in list(builds) + ["ltrun"]}
            try:
                for _ in range(args.runs):
                    for name, build in builds.items():
                        ltd = ltds[name]
                        took, cpu, ltd_cpu = timed(
                            [f"{build}/client/ltctl", "--socket", ltd.sock, "submit", "--devices",
                             str(ranks), "--", child, f"print:{args.lines}"], out, ltd.proc.pid)
                        got = max(count_lines(out), 1)
                        rows[name].append((got / took, cpu / got * 1e6, ltd_cpu / got * 1e6,
                                           got / (ranks * args.lines)))
                    if ltrun is None:
                        continue
                    took, cpu, _ = timed([ltrun, "--devices", str(ranks), "--", child,
                                          f"print:{args.lines}"], out)
                    got = max(count_lines(out), 1)
                    rows["ltrun"].append((got / took, cpu / got * 1e6, 0.0,
                                          got / (ranks * args.lines)))
            finally:
                for h in spinning:
                    h.kill()
                    h.wait()
            print(f" {mode}{' (two CPU hogs)' if mode == 'hogs' else ''}:")
            meds = {name: report(name, r) for name, r in rows.items() if r}
            if "baseline" in meds:
                (rate, cpu, ltd_cpu), (brate, bcpu, bltd) = meds["this"], meds["baseline"]
                print(f"  this / baseline: lines/s {rate / brate:.2f}x, client CPU/line "
                      f"{cpu / bcpu:.2f}x, ltd CPU/line {ltd_cpu / max(bltd, 1e-9):.2f}x")
    finally:
        for ltd in ltds.values():
            ltd.stop()
        if os.path.exists(out):
            os.unlink(out)
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
