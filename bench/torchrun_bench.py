"""ltrun in torchrun's place: `LAUNCHER --standalone --nproc_per_node 8
train.py`, the same line for both (torch 1.13's torchrun knows only the
underscore spelling). torchrun is `python3 -m torch.distributed.run` of
Debian's python3-torch. The ranks are plain Python (no torch import), so
what is measured is the launcher.

- start: from the launcher's start to every rank running (each rank's mark
  file, written first thing; polled every millisecond);
- crash: from rank 3's exit (its own clock, just before sys.exit(1)) to
  every other rank gone (its pid no longer a live process; polled every
  millisecond).

Medians of 5 (RUNS), and each launcher's time over ltrun's. Also torchrun
with --monitor_interval 0.1, torch 2.x's default (1.13's is 5 s).

Debian's torch 1.13 torchrun fails at start on Python 3.11 (its
Std.from_str finds no Std for "0": 3.11's Flag iteration leaves out zero),
so torchrun runs here with that one function replaced (PATCH below).

usage: torchrun_bench.py LTRUN [PYTHON_WITH_TORCH]
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

LTRUN = sys.argv[1]
PYTHON = sys.argv[2] if len(sys.argv) > 2 else "/usr/bin/python3"
RANKS = 8
RUNS = int(os.environ.get("RUNS", "5"))

PATCH = ("import sys, runpy; import torch.distributed.elastic.multiprocessing.api as a; "
         "a.Std.from_str = classmethod(lambda cls, vm: a.Std(int(vm)) if ':' not in vm else "
         "{int(k): a.Std(int(v)) for k, v in (m.split(':') for m in vm.split(','))}); "
         "sys.argv[0] = 'torchrun'; runpy.run_module('torch.distributed.run', run_name='__main__')")

TRAIN = r'''
import os, sys, time
d = os.environ["BENCH_DIR"]
rank = os.environ["RANK"]
with open(os.path.join(d, "pid-" + rank), "w") as f:
    f.write(str(os.getpid()))
os.rename(os.path.join(d, "pid-" + rank), os.path.join(d, "ready-" + rank))
while not os.path.exists(os.path.join(d, "crash")):
    time.sleep(0.001)
if rank == "3":
    with open(os.path.join(d, "crashed-at"), "w") as f:
        f.write(repr(time.time()))
    sys.exit(1)
time.sleep(120)
'''


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(cond, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.001)
    return False


def one(argv):
    d = tempfile.mkdtemp(prefix="torchrun-bench.")
    try:
        with open(os.path.join(d, "train.py"), "w") as f:
            f.write(TRAIN)
        # TMPDIR: torchrun leaves a torchelastic_* log dir there; removed with d.
        env = dict(os.environ, BENCH_DIR=d, PATH="/usr/bin:/bin", TMPDIR=d)
        ready = lambda: sum(n.startswith("ready-") for n in os.listdir(d)) == RANKS  # noqa: E731
        t0 = time.monotonic()
        p = subprocess.Popen(argv + ["train.py"], cwd=d, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        if not wait_for(ready, 120):
            p.kill()
            p.wait()
            raise RuntimeError(f"{argv[0]}: the ranks did not all start")
        start = time.monotonic() - t0
        pids = []
        for r in range(RANKS):
            with open(os.path.join(d, f"ready-{r}")) as f:
                pids.append(int(f.read()))
        open(os.path.join(d, "crash"), "w").close()
        ok = wait_for(lambda: not any(alive(pid) for i, pid in enumerate(pids) if i != 3), 120)
        gone_at = time.time()
        with open(os.path.join(d, "crashed-at")) as f:
            crash = gone_at - float(f.read())
        p.wait(timeout=120)
        if not ok:
            raise RuntimeError(f"{argv[0]}: ranks outlived the crash")
        return start, crash
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    line = ["--standalone", "--nproc_per_node", str(RANKS)]
    launchers = {
        "ltrun": [LTRUN] + line,
        "torchrun": [PYTHON, "-c", PATCH] + line,
        "torchrun --monitor_interval 0.1": [PYTHON, "-c", PATCH, "--monitor_interval",
                                            "0.1"] + line,
    }
    results = {}
    for name, argv in launchers.items():
        runs = [one(argv) for _ in range(RUNS)]
        results[name] = (statistics.median(r[0] for r in runs),
                         statistics.median(r[1] for r in runs))
    base = results["ltrun"]
    print(f"{RANKS} ranks, medians of {RUNS}")
    print(f"{'launcher':34} {'start (s)':>10} {'crash (s)':>10} {'start x':>8} {'crash x':>8}")
    for name, (start, crash) in results.items():
        print(f"{name:34} {start:10.3f} {crash:10.3f} {start / base[0]:8.2f} "
              f"{crash / base[1]:8.2f}")


if __name__ == "__main__":
    main()
