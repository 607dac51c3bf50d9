#!/usr/bin/python3
"""Benchmark of `ltctl stack` (issue 32) on a running 8-rank job.

For 8 Python ranks (tests/ranks/auto_train.py, torch.distributed gloo) and
8 LibTorch ranks (examples/train), under a real ltd, prints medians of 5:
  - the time of one `ltctl stack JOB` (the client's wall time), and how
    many ranks gave frames;
  - the job's progress while stacks are taken against before: steps/s of
    its slowest rank (ltd's record) over WINDOW seconds of `ltctl stack`
    back to back, over WINDOW seconds just before. 1.0: nothing lost.

Not a test: nothing is asserted; a shared 2-core machine is noisy, and 8
ranks on it are slow already.
Usage: bench/stack_bench.py [--build DIR] [--runs N] [--window S]
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_bench import Ltd, median_line  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"
TRAIN_PY = os.path.join(ROOT, "tests", "ranks", "auto_train.py")


def slowest_step(ltd, job):
    ranks = ltd.show(job).get("ranks", [])
    steps = [int(r.get("last_step") or 0) for r in ranks]
    return min(steps) if len(steps) == 8 else 0


def rate(ltd, job, seconds, during=None):
    """Steps/s of the slowest rank over `seconds`, running `during` meanwhile."""
    s0, t0 = slowest_step(ltd, job), time.monotonic()
    while time.monotonic() - t0 < seconds:
        if during:
            during()
        else:
            time.sleep(0.1)
    return (slowest_step(ltd, job) - s0) / (time.monotonic() - t0)


def bench(ltd, name, argv, runs, window):
    stop = os.path.join(ltd.dir, "stop")
    job = ltd.ctl("submit", "-d", "--devices", "8", "--", *argv).stdout.strip()
    deadline = time.time() + 600
    while slowest_step(ltd, job) < 3:
        if time.time() > deadline or ltd.show(job)["state"] not in ("PENDING", "RUNNING"):
            sys.exit(f"{name}: the job did not start training: {ltd.show(job)}")
        time.sleep(0.5)
    times, framed, ratios = [], [], []
    for _ in range(runs):
        before = rate(ltd, job, window)
        calls = []

        def one():
            t = time.perf_counter()
            r = ltd.ctl("--json", "stack", job)
            calls.append(time.perf_counter() - t)
            got = json.loads(r.stdout)["ranks"]
            framed.append(sum(1 for g in got if g.get("frames")))

        during = rate(ltd, job, window, one)
        times.extend(calls)
        if before > 0:
            ratios.append(during / before)
    median_line(f"{name}: ltctl stack, 8 ranks", times)
    print(f"{name}: ranks with frames per call: median {statistics.median(framed)} of 8")
    if ratios:
        print(f"{name}: steps/s during stacks / before: median {statistics.median(ratios):.2f} "
              f"(min {min(ratios):.2f}, max {max(ratios):.2f}, n={len(ratios)})")
    open(stop, "w").close()
    ltd.ctl("kill", job, check=False)
    ltd.ctl("wait", job, check=False)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--window", type=float, default=4.0)
    args = p.parse_args()
    ltd = Ltd(args.build, 8)
    try:
        bench(ltd, "python (gloo DDP)",
              [PYTHON, TRAIN_PY, "--steps", "100000000", "--until-file", "/nonexistent"],
              args.runs, args.window)
        train = os.path.join(args.build, "examples", "train")
        if os.path.exists(train):
            bench(ltd, "libtorch (examples/train)", [train, "--steps", "100000000"], args.runs,
                  args.window)
        else:
            print("libtorch: examples/train not built; skipped")
    finally:
        ltd.stop()


if __name__ == "__main__":
    main()
