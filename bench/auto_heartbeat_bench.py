#!/usr/bin/python3
"""Benchmark of ltd's automatic heartbeats (issue 10).

Prints medians of:
  1. the per-step cost of the instrumentation: a tight loop of optimizer
     steps (SGD on one small tensor, nothing else), timed in batches of
     2,000 in a Python started as ltd starts a rank (lines going to a
     socket), batches alternating between the instrumentation on (step
     counter hooked, checking thread sampling every 25 ms, as for a 1s
     timeout) and off (unhooked, thread stopped), in the same process, so
     that the comparison is not lost in the noise between processes;
  2. the time from "no rank progresses" to the verdict: a 2-rank job of
     Python (importing torch, as ltd watches from then on) whose ranks
     both stop (time.sleep) at a moment each
     prints; the verdict's time (root_cause.at) minus that moment, less the
     hang timeout, under a real ltd.

Not a test: nothing is asserted; a shared 2-core machine is noisy.
Usage: bench/auto_heartbeat_bench.py [--build DIR] [--runs N]
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_bench import Ltd, median_line, parse_time  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AUTOLOAD = os.path.join(ROOT, "worker_runtime", "python", "autoload")
PYTHON = "/usr/bin/python3"

STEP_LOOP = r"""
import statistics, sys, threading, time, torch
import torch.optim.optimizer as oo
m = sys.modules["ltd_autoheartbeat"]
assert m._active, "the module is not active"
saved = {}

def instrument(on):
    # The step counter: torch 2.x's global post-hooks, or 1.13's entry point.
    if hasattr(oo, "_global_optimizer_post_hooks"):
        hooks = oo._global_optimizer_post_hooks
        if on:
            hooks.update(saved)
        else:
            saved.update(hooks)
            hooks.clear()
    else:
        oo.Optimizer._optimizer_step_code = m._count_step if on else (lambda self: None)
    # The checking thread: stopped and joined, or running.
    for t in threading.enumerate():
        if t.name == "ltd-auto-heartbeat":
            m._active = False
            t.join()
    if on:
        m._active = True
        watcher = m._Watcher(float(sys.argv[2]), threading.main_thread().ident)
        threading.Thread(target=watcher.run, name="ltd-auto-heartbeat", daemon=True).start()

w = torch.zeros(16, requires_grad=True)
w.grad = torch.ones(16)
opt = torch.optim.SGD([w], lr=1e-6)
batch, batches = 2000, int(sys.argv[1])
for _ in range(200):
    opt.step()  # warm up
times = {False: [], True: []}
for i in range(2 * batches):
    on = i % 2 == 1
    instrument(on)
    t = time.perf_counter()
    for _ in range(batch):
        opt.step()
    times[on].append((time.perf_counter() - t) / batch)
print(m._steps > 0, " ".join(map(str, times[False])), "|", " ".join(map(str, times[True])))
"""

INTERVAL_S = 0.1  # a 1s hang timeout's checks; the default 5m checks every 1s


def step_loop(batches):
    ours, theirs = socket.socketpair()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LT_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = AUTOLOAD
    env["LT_AUTO_HEARTBEAT"] = str(int(INTERVAL_S * 1000))
    env["LT_HEARTBEAT_FD"] = "3"
    fd = os.dup(theirs.fileno())
    # -S trampoline (not instrumented itself) puts the socket on fd 3.
    cmd = [PYTHON, "-S", "-c", "import os, sys; os.dup2(int(sys.argv[1]), 3);"
           " os.execv(sys.argv[2], sys.argv[2:])", str(fd), PYTHON, "-c", STEP_LOOP, str(batches),
           str(INTERVAL_S)]
    proc = subprocess.Popen(cmd, env=env, pass_fds=(fd,), stdout=subprocess.PIPE, text=True)
    os.close(fd)
    theirs.close()
    ours.setblocking(False)
    while proc.poll() is None:  # drain what the module sends, as ltd would
        try:
            ours.recv(65536)
        except BlockingIOError:
            time.sleep(0.01)
    out = proc.stdout.read()
    proc.stdout.close()
    ours.close()
    counted, _, rest = out.partition(" ")
    off, _, on = rest.partition("|")
    if counted != "True" or not on.strip():
        sys.exit(f"the step loop did not run as expected: {out!r}")
    return [float(x) for x in off.split()], [float(x) for x in on.split()]


def bench_step_cost(rounds, batches):
    on, off = [], []
    for _ in range(rounds):
        o, i = step_loop(batches)
        off += o
        on += i
    base = median_line("optimizer step, without the module", off, "us", 1e6)
    median_line("optimizer step, with the module", on, "us", 1e6)
    # Neighbouring batches see the same machine: the median of their
    # differences is what the instrumentation costs, with the noise of a
    # shared machine mostly cancelled.
    cost = statistics.median(b - a for a, b in zip(off, on))
    print(f"{'  cost per step (median of paired batches)':<48} {cost * 1e9:9.1f} ns"
          f"  ({100 * cost / (base / 1e6):.2f} % of the step)")


RANK = r"""
import os, sys, time
import torch  # a rank is watched from its import of torch
end = time.monotonic() + float(sys.argv[1])
n = 0
while time.monotonic() < end:  # working: the stack moves
    n += 1
print("stalled at %.6f" % time.time(), flush=True)
time.sleep(3600)
"""


def bench_verdict(build, runs, timeout_s=2.0):
    delays = []
    ltd = Ltd(build, 2, ["--stack-budget", "0"])
    try:
        for i in range(runs):
            r = ltd.ctl("submit", "--devices", "2", "--heartbeat-timeout", f"{int(timeout_s * 1000)}ms",
                        "--", PYTHON, "-c", RANK, "1", check=False)
            job = ltd.show(str(i + 1))
            stalls = [float(line.split()[-1]) for line in r.stdout.splitlines() if "stalled at" in line]
            cause = job.get("root_cause") or {}
            if r.returncode != 124 or len(stalls) != 2 or cause.get("reason") != "hang":
                print(f"run {i}: no hang verdict ({r.returncode}): {r.stderr.strip()}")
                continue
            delays.append(parse_time(cause["at"]) - max(stalls) - timeout_s)
    finally:
        ltd.stop()
    median_line(f"no rank progresses -> verdict, past the {timeout_s:g}s timeout", delays)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--batches", type=int, default=40)
    args = p.parse_args()
    bench_step_cost(max(1, args.runs // 2), args.batches)
    bench_verdict(args.build, args.runs)


if __name__ == "__main__":
    main()
