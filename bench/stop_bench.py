#!/usr/bin/python3
"""ltd with nothing running, stopped by SIGTERM: SIGTERM to its exit (waitpid).

Prints medians for an ltd that is idle, one that answered an `ltctl ps` a
moment ago, and one a Python ltd.Client still holds a connection to (what
took 2 s: gRPC's server shutdown waits its whole deadline for an idle
client connection). Not a test: nothing is asserted.
Usage: bench/stop_bench.py [--build DIR] [--runs N]
"""

import argparse
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_bench import Ltd, median_line  # noqa: E402


def stop_time(ltd):
    t0 = time.perf_counter()
    ltd.proc.send_signal(signal.SIGTERM)
    ltd.proc.wait(timeout=60)
    took = time.perf_counter() - t0
    ltd.proc.terminate = lambda: None  # stopped already
    ltd.stop()
    return took


def connected(client):
    client.ps()
    return client  # kept, with its connection, until ltd has stopped


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(here, "..", "build"))
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(args.build, "python"))
    import ltd as client_module

    for name, before in (
        ("idle", lambda ltd: None),
        ("after an `ltctl ps`", lambda ltd: ltd.ctl("ps")),
        ("a Python ltd.Client connected", lambda ltd: connected(client_module.Client(ltd.sock))),
    ):
        times, keep = [], []
        for _ in range(args.runs):
            ltd = Ltd(args.build, 2)
            time.sleep(0.3)  # its spare supervisor up: what a running ltd has
            keep.append(before(ltd))
            times.append(stop_time(ltd))
        median_line("SIGTERM to exit, " + name, times)


if __name__ == "__main__":
    main()
