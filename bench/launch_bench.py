#!/usr/bin/python3
"""ltd.launch of a 2-rank no-op function: time to result, against the alternatives.

Prints medians, side by side in one run on this machine:
  1. ltd.launch(noop, devices=2) under ltd (submit, 2 fresh interpreters
     that unpickle the function, rank 0's value back);
  2. ltd.launch(noop, devices=2, via="ltrun") (no daemon);
  3. `ltctl submit --devices 2 -- python3 -c pass` (the same two
     interpreters, nothing pickled, nothing returned);
  4. the same two with a function that imports torch, which is what each
     rank of (5) pays whatever it runs;
  5. torch.multiprocessing.spawn(noop, nprocs=2) (spawned interpreters that
     import torch, no supervision; accelerate-style fork is not measured:
     accelerate is not in Debian 12).
and the ratios to (3). Not a test: nothing is asserted.
Usage: bench/launch_bench.py [--build DIR] [--runs N]
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_bench import Ltd, median_line  # noqa: E402


def noop():
    return 0


def import_torch():
    import torch  # noqa: F401 - what every spawned rank of (4) pays

    return 0


def timed(fn, runs):
    fn()  # warm the page cache
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def spawn_noop(rank):
    pass


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p.add_argument("--build", default=os.path.join(here, "build"))
    p.add_argument("--runs", type=int, default=10)
    args = p.parse_args()
    build = os.path.abspath(args.build)
    sys.path.insert(0, os.path.join(build, "python"))
    os.environ["PYTHONPATH"] = os.path.join(build, "python") + (
        os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    import io

    import ltd

    d = Ltd(build, 8)
    try:
        quiet = io.StringIO()
        results = {}
        results["launch"] = median_line("ltd.launch(noop, devices=2), via ltd", timed(
            lambda: ltd.launch(noop, devices=2, via="ltd", socket=d.sock, stdout=quiet), args.runs))
        results["ltrun"] = median_line("ltd.launch(noop, devices=2), via ltrun", timed(
            lambda: ltd.launch(noop, devices=2, via="ltrun", ltrun=f"{build}/daemon/ltrun", stdout=quiet),
            args.runs))
        results["ltctl"] = median_line("ltctl submit --devices 2 -- python3 -c pass", timed(
            lambda: d.ctl("submit", "--devices", "2", "--", sys.executable, "-c", "pass"), args.runs))
        results["launch_torch"] = median_line("ltd.launch(import torch), via ltd", timed(
            lambda: ltd.launch(import_torch, devices=2, via="ltd", socket=d.sock, stdout=quiet), args.runs))
        median_line("ltctl submit ... python3 -c 'import torch'", timed(
            lambda: d.ctl("submit", "--devices", "2", "--", sys.executable, "-c", "import torch"), args.runs))
        try:
            import torch.multiprocessing as mp

            results["spawn"] = median_line("torch.multiprocessing.spawn(noop, nprocs=2)", timed(
                lambda: mp.spawn(spawn_noop, nprocs=2), args.runs))
        except ImportError:
            print("torch.multiprocessing.spawn: no torch (python3-torch)")
        if results.get("launch_torch") and results.get("spawn"):
            print(f"ratio spawn / ltd.launch(import torch): {results['spawn'] / results['launch_torch']:.2f}x")
        base = results.get("ltctl")
        if base:
            for k, v in results.items():
                if v and k in ("launch", "ltrun", "spawn"):
                    print(f"ratio {k} / ltctl submit: {v / base:.2f}x")
    finally:
        d.stop()


if __name__ == "__main__":
    main()
