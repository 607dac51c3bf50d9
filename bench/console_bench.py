#!/usr/bin/python3
"""What live output costs: rank lines through an attached `ltctl submit`
and through `ltrun`, into a file (the per-line path a user's terminal,
pipe or Slurm output file sees).

Prints, for a 2-rank job printing LINES lines per rank as fast as it can,
written to a file: the client's CPU time per line it wrote (the per-line
cost live output could add), and the lines/s from submit to exit. ltd
drops lines for a client that falls behind (with a notice), so lines/s
counts the lines that reached the file. With --baseline-ltctl, the same
through another ltctl binary (a build from before a change) against the
same ltd, in turns, and the ratios. With --output, every job also writes
an `--output` file (as the user-side writer, lt-userio, does now): lines/s
then counts the lines that reached that file, and with --baseline-build
ltrun of another build (one from before a change) runs in turns with
this one's, the ratios printed (ltrun's CPU is the supervisor's, its
writer's and its ranks').

Not a test: nothing is asserted; a shared 2-core machine is noisy.
Usage: bench/console_bench.py [--build DIR] [--runs N] [--lines N]
                              [--baseline-ltctl PATH] [--output]
                              [--baseline-build DIR]
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_bench import Ltd  # noqa: E402


def timed(argv, out_path):
    """Wall time and the command's CPU time (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out_path, "wb") as out:
        start = time.monotonic()
        r = subprocess.run(argv, stdout=out, stderr=subprocess.DEVNULL, timeout=600)
        took = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"{argv[0]} exited {r.returncode}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, cpu


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def report(name, rates, cpus):
    rates, cpus = sorted(rates), sorted(cpus)
    med, cpu = statistics.median(rates), statistics.median(cpus)
    print(f"{name:<24} {cpu:8.2f} us CPU/line (min {cpus[0]:.2f}, max {cpus[-1]:.2f})  "
          f"{med:12,.0f} lines/s (min {rates[0]:,.0f}, max {rates[-1]:,.0f}), n={len(rates)}")
    return med, cpu


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--lines", type=int, default=100000)
    p.add_argument("--baseline-ltctl", default="")
    p.add_argument("--output", action="store_true")
    p.add_argument("--baseline-build", default="")
    args = p.parse_args()
    build = os.path.abspath(args.build)
    child = f"{build}/tests/lt_test_child"
    ranks = 2
    tmp = tempfile.mkdtemp(prefix="console-bench.")
    out = os.path.join(tmp, "out.txt")
    ltctls = {"this ltctl": f"{build}/client/ltctl"}
    if args.baseline_ltctl:
        ltctls["baseline ltctl"] = os.path.abspath(args.baseline_ltctl)
    rates = {name: [] for name in ltctls}
    ltruns = {"ltrun": f"{build}/daemon/ltrun"}
    if args.baseline_build:
        ltruns["baseline ltrun"] = os.path.abspath(args.baseline_build) + "/daemon/ltrun"
    for name in ltruns:
        rates[name] = []
    cpus = {name: [] for name in rates}
    file = os.path.join(tmp, "file.log")
    # With --output, what counts is what reached the --output file.
    to_file = ["--output", file] if args.output else []

    def reached():
        got = count_lines(file if args.output else out)
        if args.output:
            os.unlink(file)
        return got

    ltd = Ltd(build, devices=4)
    try:
        for _ in range(args.runs):
            for name, ltctl in ltctls.items():
                took, cpu = timed([ltctl, "--socket", ltd.sock, "submit", "--devices", str(ranks)]
                                  + to_file + ["--", child, f"print:{args.lines}"], out)
                got = reached()
                rates[name].append(got / took)
                cpus[name].append(cpu / max(got, 1) * 1e6)
            for name, ltrun in ltruns.items():
                took, cpu = timed([ltrun, "--devices", str(ranks)] + to_file
                                  + ["--", child, f"print:{args.lines}"], out)
                got = reached()
                rates[name].append(got / took)
                cpus[name].append(cpu / max(got, 1) * 1e6)  # ltrun runs the ranks too
    finally:
        ltd.stop()
        for f in (out, file):
            if os.path.exists(f):
                os.unlink(f)
        os.rmdir(tmp)
    print(f"{ranks} ranks x {args.lines:,} lines, submit to exit, into "
          f"{'an --output file' if args.output else 'a file'} (ltrun's CPU includes its ranks'):")
    meds = {name: report(f"  {name}", rates[name], cpus[name]) for name in rates}
    if "baseline ltctl" in meds:
        (rate, cpu), (base_rate, base_cpu) = meds["this ltctl"], meds["baseline ltctl"]
        print(f"  this / baseline: CPU per line {cpu / base_cpu:.2f}x, lines/s "
              f"{rate / base_rate:.2f}x")
    if "baseline ltrun" in meds:
        (rate, cpu), (base_rate, base_cpu) = meds["ltrun"], meds["baseline ltrun"]
        print(f"  ltrun this / baseline: CPU per line {cpu / base_cpu:.2f}x, lines/s "
              f"{rate / base_rate:.2f}x")


if __name__ == "__main__":
    main()
