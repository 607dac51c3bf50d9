"""A Python rank that sets its own heartbeat timeout, then one rank stalls.

Every rank calls ltworker.set_timeout(--timeout) before its first beat, as a
script run without `ltctl submit --heartbeat-timeout` would; the timeout
alone must arm the watchdog. Rank --hang-rank beats --beats times and then
stalls in `stalled_after_set_timeout`; the others keep beating. Everything
ends by itself (exit 0) after --seconds, so a missing watchdog shows as a
job that succeeds instead of a test that never ends.
"""
import argparse
import os
import time

import ltworker


def stalled_after_set_timeout(until):
    while time.monotonic() < until:
        time.sleep(0.1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--timeout", type=float, required=True)
    p.add_argument("--hang-rank", type=int, default=0)
    p.add_argument("--beats", type=int, default=3)
    p.add_argument("--seconds", type=float, default=30)
    args = p.parse_args()
    rank = int(os.environ["RANK"])
    until = time.monotonic() + args.seconds

    ltworker.set_timeout(args.timeout)
    step = 0
    while time.monotonic() < until:
        if rank == args.hang_rank and step == args.beats:
            stalled_after_set_timeout(until)
            break
        ltworker.heartbeat(step)
        step += 1
        time.sleep(0.05)


if __name__ == "__main__":
    main()
