#!/usr/bin/python3
"""The cross-node fence on etcd: how fast a fault on node 1 ends node 0.

Two ltrun processes stand in for two nodes of 2 ranks each, meeting at a
real etcd on loopback (Debian's etcd-server, started here). Node 0's ranks
only sleep, so nothing but the fence can end them (no gloo noticing a dead
peer). Prints medians of:
  1. crash: node 1's rank 1 exits 3; from node 1's supervisor seeing it
     (its root cause's time) to node 0's teardown starting (teardown_at)
     and to the last rank of node 0 gone (node 0's job ended_at);
  2. hang: node 1's ranks beat once and stop (--heartbeat-timeout 1s);
     from node 1's verdict to node 0's last rank gone, and from the last
     heartbeat (timeout + fence).

Not a test: nothing is asserted; a shared 2-core machine is noisy.
Usage: bench/etcd_fence_bench.py [--build DIR] [--runs N]
`measure_fence(build_dir, runs)` returns the medians (ms) as a dict.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_bench import parse_time  # noqa: E402

CRASH = 'if [ "$RANK" = 3 ]; then sleep 1; exit 3; fi; exec sleep 600'
BEAT_ONCE = 'echo hb 1 >&$LT_HEARTBEAT_FD; exec sleep 600'


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Etcd:
    def __init__(self, tmp):
        self.port = free_port()
        peer = free_port()
        client = f"http://127.0.0.1:{self.port}"
        peer_url = f"http://127.0.0.1:{peer}"
        self.log = open(os.path.join(tmp, "etcd.log"), "w")
        self.proc = subprocess.Popen(
            ["/usr/bin/etcd", "--name=bench", f"--data-dir={tmp}/etcd",
             f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
             f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
             f"--initial-cluster=bench={peer_url}", "--log-level=error", "--logger=zap"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("etcd did not start")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def run_pair(build, etcd_port, tmp, run_id, flags0, flags1, program):
    """Runs nodes 0 and 1; returns their records."""
    ltrun = os.path.join(build, "daemon", "ltrun")
    procs, reports = [], []
    for node, flags in ((0, flags0), (1, flags1)):
        report = os.path.join(tmp, f"{run_id}-{node}.json")
        reports.append(report)
        argv = [ltrun, "--rdzv", f"etcd://127.0.0.1:{etcd_port}", "--run-id", run_id,
                "--nnodes", "2", "--node-rank", str(node), "--devices", "2",
                "--master-addr", "127.0.0.1", "--no-slurm", "--no-auto-heartbeat",
                "--report", report] + flags + ["--", "/bin/sh", "-c", program]
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for p in procs:
        p.wait(120)
    records = []
    for r in reports:
        with open(r) as f:
            records.append(json.load(f))
    return records


def measure_fence(build_dir, runs=5):
    tmp = tempfile.mkdtemp(prefix="ltd-fence-bench.")
    etcd = Etcd(tmp)
    crash_start, crash_gone, hang_fence, hang_total = [], [], [], []
    try:
        for i in range(runs):
            n0, n1 = run_pair(build_dir, etcd.port, tmp, f"crash{i}-{os.getpid()}", [], [], CRASH)
            fault = parse_time(n1["root_cause"]["at"])
            crash_start.append(parse_time(n0["teardown_at"]) - fault)
            crash_gone.append(parse_time(n0["ended_at"]) - fault)
            n0, n1 = run_pair(build_dir, etcd.port, tmp, f"hang{i}-{os.getpid()}",
                              ["--heartbeat-timeout", "10m"],
                              ["--heartbeat-timeout", "1s", "--stack-budget", "0"], BEAT_ONCE)
            verdict = parse_time(n1["root_cause"]["at"])
            beats = [parse_time(r["last_heartbeat_at"]) for r in n1["ranks"]
                     if r.get("last_heartbeat_at")]
            gone = parse_time(n0["ended_at"])
            hang_fence.append(gone - verdict)
            hang_total.append(gone - max(beats))
    finally:
        etcd.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    med = lambda v: statistics.median(v) * 1000.0 if v else None  # noqa: E731
    return {
        "crash_to_node0_teardown_ms": med(crash_start),
        "crash_to_node0_gone_ms": med(crash_gone),
        "hang_verdict_to_node0_gone_ms": med(hang_fence),
        "hang_last_beat_to_node0_gone_ms": med(hang_total),
        "hang_timeout_ms": 1000.0,
        "runs": runs,
    }


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(here, "build"))
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    m = measure_fence(args.build, args.runs)
    print(f"etcd fence, 2 nodes x 2 ranks on loopback, {m['runs']} runs (medians)")
    print(f"  crash on node 1 -> node 0 teardown starts      {m['crash_to_node0_teardown_ms']:9.2f} ms")
    print(f"  crash on node 1 -> last rank of node 0 gone    {m['crash_to_node0_gone_ms']:9.2f} ms")
    print(f"  hang verdict on node 1 -> node 0 gone          {m['hang_verdict_to_node0_gone_ms']:9.2f} ms")
    print(f"  hang: last beat -> node 0 gone (timeout 1 s)   {m['hang_last_beat_to_node0_gone_ms']:9.2f} ms")


if __name__ == "__main__":
    main()
