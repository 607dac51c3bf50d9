#!/usr/bin/python3
"""Benchmark of what ltd says about hangs and stragglers being true (issue 19).

Prints:
  1. the demo's hang (scripts/demo.sh: examples/train, 4 ranks, rank 1
     hangs at step 30, --heartbeat-timeout 3s, the default 5s stack
     budget): over N runs, how often the root cause is rank 1 (right), no
     rank (none: the evidence did not single one out) or another (wrong);
  2. the time to take the stacks of 8 LibTorch ranks (examples/train,
     running), as a hang investigation takes them (bench/stack_cost: every
     rank at once, eu-stack else gdb, through lt-exec), and how many came;
  3. the slow-rank case under load: with two, then four CPU hogs
     (`sh -c 'while :; do :; done'`), 3 Python ranks
     (tests/ranks/auto_train.py, automatic heartbeats, 3s timeout), rank 0
     busy 9s in Python while the others wait in a barrier: false hang
     verdicts over N runs; and the real hang's verdict time with two hogs
     (rank 1 sleeps outside any collective: its stall to root_cause.at);
  4. stragglers: flags seen by `show` on lock-step jobs (explicit beats of
     lt_test_child; a 4-rank DDP job of auto_train.py under automatic
     heartbeats), and the leader's step when a rank 30% slower than the
     others (explicit beats) is first flagged.

Not a test: nothing is asserted; a shared 2-core machine is noisy.
Usage: bench/hang_truth_bench.py [--build DIR] [--runs N] [--skip PART,...]
"""

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_bench import Ltd, median_line  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"
AUTO_TRAIN = os.path.join(ROOT, "tests", "ranks", "auto_train.py")


def wait_for(ltd, job, pred, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        j = ltd.show(job)
        if pred(j):
            return j
        time.sleep(0.2)
    return None


def bench_demo_hang(build, train, runs):
    tally = {"right": 0, "none": 0, "wrong": 0}
    notes = []
    ltd = Ltd(build, 4)
    try:
        for i in range(runs):
            r = ltd.ctl("submit", "--devices", "4", "--heartbeat-timeout", "3s", "--", train,
                        "--steps", "100000", "--step-ms", "5", "--print-every", "1000",
                        "--hang-rank", "1", "--hang-step", "30", check=False)
            job = ltd.show(str(i + 1))
            cause = job.get("root_cause") or {}
            rank = cause.get("rank")
            verdict = "right" if rank == 1 else "none" if rank is None else "wrong"
            if r.returncode != 124 or cause.get("reason") != "hang":
                verdict = "wrong"
            tally[verdict] += 1
            taken = sum(1 for x in (job.get("hang_report") or {}).get("ranks", [])
                        if x.get("stack_status") == "taken")
            if verdict != "right":
                notes.append(f"  run {i}: {verdict} ({r.returncode}), {taken}/4 stacks: "
                             f"{cause.get('message', '')}")
    finally:
        ltd.stop()
    print(f"{'demo hang blame over %d runs' % runs:<48} right {tally['right']}, "
          f"none {tally['none']}, wrong {tally['wrong']}")
    for n in notes:
        print(n)


def bench_eight_stacks(build, train, runs):
    ltd = Ltd(build, 8)
    times, taken = [], []
    try:
        job = ltd.ctl("submit", "-d", "--devices", "8", "--", train, "--steps", "100000000",
                      "--step-ms", "5", "--print-every", "100000").stdout.strip()
        j = wait_for(ltd, job, lambda j: len(j.get("ranks", [])) == 8 and all(
            int(r.get("last_step") or 0) > 5 and r.get("pid") for r in j["ranks"]))
        if j is None:
            print("8 LibTorch ranks did not start; no figure")
            return
        pids = [str(r["pid"]) for r in j["ranks"]]
        for _ in range(runs):
            out = subprocess.run([f"{build}/bench/stack_cost", f"{build}/daemon/lt-exec", "5000",
                                  *pids], stdout=subprocess.PIPE, text=True, timeout=120).stdout
            first = out.splitlines()[0].split()
            times.append(float(first[0]) / 1000)
            taken.append(int(first[2].split("/")[0]))
        ltd.ctl("kill", job, check=False)
        wait_for(ltd, job, lambda j: j["state"] != "RUNNING", 60)
    finally:
        ltd.stop()
    median_line("stacks of 8 LibTorch ranks (5s budget)", times)
    print(f"{'  stacks taken per run':<48} {sorted(taken)} of 8")


def cpu_hogs(n):
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(n)]


def stop_hogs(hogs):
    for h in hogs:
        h.kill()
        h.wait()


def epoch(rfc3339):
    """ltctl's RFC 3339 UTC time, to seconds since the epoch."""
    from datetime import datetime, timezone
    text = rfc3339.rstrip("Z")
    whole, _, frac = text.partition(".")
    t = datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    return t + (float("0." + frac) if frac else 0.0)


def bench_slow_rank_under_load(build, runs, nhogs):
    hogs = cpu_hogs(nhogs)
    false_alarms, other = 0, 0
    notes = []
    ltd = Ltd(build, 3)
    try:
        for i in range(runs):
            start = time.time()
            r = ltd.ctl("submit", "--devices", "3", "--heartbeat-timeout", "3s", "--", PYTHON,
                        AUTO_TRAIN, "--steps", "20", "--slow-rank", "0", "--slow-step", "5",
                        "--slow-seconds", "9", check=False)
            if r.returncode == 124:
                false_alarms += 1
                cause = (ltd.show(str(i + 1)).get("root_cause") or {}).get("message", "")
                notes.append(f"  run {i}: 124 after {time.time() - start:.1f}s: {cause}")
            elif r.returncode != 0:
                other += 1
                notes.append(f"  run {i}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    finally:
        ltd.stop()
        stop_hogs(hogs)
    print(f"{'slow rank, %d CPU hogs: false hangs' % nhogs:<48} {false_alarms}/{runs}"
          f"{f' (and {other} other failures)' if other else ''}")
    for n in notes:
        print(n)


def bench_real_hang_verdict(build, runs, nhogs):
    """Rank 1 sleeps outside any collective at step 10 (3s timeout): the
    time from its stall to the hang verdict (root_cause.at)."""
    hogs = cpu_hogs(nhogs)
    times, wrong = [], 0
    ltd = Ltd(build, 3)
    try:
        for i in range(runs):
            r = ltd.ctl("submit", "--devices", "3", "--heartbeat-timeout", "3s", "--", PYTHON,
                        AUTO_TRAIN, "--steps", "100000", "--hang-rank", "1", "--hang-step", "10",
                        check=False)
            cause = ltd.show(str(i + 1)).get("root_cause") or {}
            mark = "rank 1 stalls at "
            at = r.stdout.find(mark)
            if r.returncode != 124 or cause.get("rank") != 1 or at < 0:
                wrong += 1
                continue
            stalled = float(r.stdout[at + len(mark):].split()[0])
            times.append(epoch(cause["at"]) - stalled)
    finally:
        ltd.stop()
        stop_hogs(hogs)
    median_line("real hang -> verdict, 3s timeout, %d hogs" % nhogs, times, "s", 1.0)
    if wrong:
        print(f"  {wrong}/{runs} runs did not end in a hang verdict on rank 1")


def straggler_samples(ltd, job, seconds):
    """(samples, samples with a flag, leader step at the first flag per rank)."""
    samples, flagged, first = 0, 0, {}
    wait_for(ltd, job, lambda j: j["state"] != "PENDING", 60)
    end = time.time() + seconds
    while time.time() < end:
        j = ltd.show(job)
        if j["state"] != "RUNNING":
            break
        ranks = j["ranks"]
        if all(r.get("last_step") is not None for r in ranks):
            samples += 1
            leader = max(r["last_step"] for r in ranks)
            marks = [r["rank"] for r in ranks if r.get("straggler")]
            flagged += bool(marks)
            for m in marks:
                first.setdefault(m, leader)
        time.sleep(0.1)
    return samples, flagged, first


def bench_stragglers(build, child):
    ltd = Ltd(build, 4)
    try:
        # Explicit beats, every step, all ranks alike (30ms a step).
        job = ltd.ctl("submit", "-d", "--devices", "4", "--", child,
                      "beat:100000:30").stdout.strip()
        n, f, _ = straggler_samples(ltd, job, 15)
        ltd.ctl("kill", job, check=False)
        print(f"{'lock-step job (explicit beats): samples flagged':<48} {f}/{n}")
        # Rank 3 is 30% slower (43ms a step).
        job = ltd.ctl("submit", "-d", "--devices", "4", "--", child, "--rank", "3",
                      "beat:100000:43", "beat:100000:30").stdout.strip()
        n, f, first = straggler_samples(ltd, job, 15)
        ltd.ctl("kill", job, check=False)
        others = sorted(r for r in first if r != 3)
        print(f"{'rank 30% slower: leader step at its first flag':<48} "
              f"{first.get(3, 'never')} (other ranks flagged: {others or 'none'})")
        # DDP in lock-step under automatic heartbeats (steps sampled once per
        # check interval, each rank at its own phase).
        job = ltd.ctl("submit", "-d", "--devices", "4", "--heartbeat-timeout", "30s", "--",
                      PYTHON, AUTO_TRAIN, "--steps", "100000").stdout.strip()
        wait_for(ltd, job, lambda j: all(r.get("last_step") is not None for r in j["ranks"]), 120)
        n, f, _ = straggler_samples(ltd, job, 20)
        ltd.ctl("kill", job, check=False)
        print(f"{'lock-step DDP job (automatic heartbeats): flagged':<48} {f}/{n}")
    finally:
        ltd.stop()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--skip", default="", help="comma-separated: demo,stacks,load,verdict,stragglers")
    args = p.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    train = os.path.join(args.build, "examples", "train")
    child = os.path.join(args.build, "tests", "lt_test_child")
    have_train = os.access(train, os.X_OK)
    if not have_train:
        print(f"{train} is not built (no LibTorch): the demo and stack figures are skipped")
    if have_train and "demo" not in skip:
        bench_demo_hang(args.build, train, args.runs)
    if have_train and "stacks" not in skip:
        bench_eight_stacks(args.build, train, max(3, args.runs // 4))
    if "load" not in skip:
        for nhogs in (2, 4):
            bench_slow_rank_under_load(args.build, args.runs, nhogs)
    if "verdict" not in skip:
        bench_real_hang_verdict(args.build, max(5, args.runs // 4), 2)
    if "stragglers" not in skip:
        bench_stragglers(args.build, child)


if __name__ == "__main__":
    main()
