"""A 4-node run on one machine for bench/multinode_bench.py: each node an
ltrun in a network namespace of its own on a bridge made here
(10.213.N.0/24), 2 gloo ranks each (tests/ranks/multinode_train.py), a real
etcd on the bridge's address. Faults on node 2: global rank 5 exits 3
(crash), rank 5 stops outside any collective (hang), node 2's ltrun and
ranks SIGKILLed at once (kill). Measured from the fault (the rank's own
clock, or the kill): the last survivor's rank gone (polled every
millisecond), and every node's final record written (its --report file,
which ltrun writes once the run's root cause is chosen), with whether every
record names node 2. As root, with ip, nsenter and etcd; everything made
is removed at the end, whatever happened.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multinode_bench import alive, read, wait_for  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
TRAIN = os.path.join(SOURCE, "tests", "ranks", "multinode_train.py")
PYTHON = "/usr/bin/python3"
NODES = 4


def sh(cmd):
    subprocess.run(["/bin/sh", "-c", cmd], check=True, stdout=subprocess.DEVNULL)


class Cluster:
    """The bridge, the namespaces and etcd; stop() removes them."""

    def __init__(self):
        tag = os.getpid() % 100000
        self.net = os.getpid() % 250 + 1
        self.bridge = f"ltbb{tag}"
        self.netns = [f"ltbn{tag}-{i}" for i in range(NODES)]
        self.dir = tempfile.mkdtemp(prefix="mn-bench-netns.")
        self.etcd = None
        try:
            sh(f"ip link add {self.bridge} type bridge && ip addr add {self.addr(1)}/24 dev "
               f"{self.bridge} && ip link set {self.bridge} up")
            for i, ns in enumerate(self.netns):
                veth = f"ltbv{tag}-{i}"
                sh(f"ip netns add {ns} && ip link add {veth} type veth peer name eth0 netns {ns} && "
                   f"ip link set {veth} master {self.bridge} up && "
                   f"ip -n {ns} addr add {self.addr(10 + i)}/24 dev eth0 && "
                   f"ip -n {ns} link set eth0 up && ip -n {ns} link set lo up")
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                peer = s.getsockname()[1]
            client = f"http://{self.addr(1)}:{self.port}"
            self.etcd = subprocess.Popen(
                ["/usr/bin/etcd", "--name=bench", f"--data-dir={self.dir}/etcd",
                 f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
                 f"--listen-peer-urls=http://127.0.0.1:{peer}",
                 f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                 f"--initial-cluster=bench=http://127.0.0.1:{peer}", "--log-level=error"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            ok = wait_for(lambda: subprocess.run(
                ["curl", "-s", f"{client}/health"], stdout=subprocess.PIPE, text=True
            ).stdout.find('"health":"true"') >= 0, 10, every=0.05)
            if not ok:
                raise RuntimeError("etcd was not healthy within 10 s")
        except Exception:
            self.stop()
            raise

    def addr(self, host):
        return f"10.213.{self.net}.{host}"

    def stop(self):
        if self.etcd is not None:
            self.etcd.terminate()
            self.etcd.wait()
        for ns in self.netns:
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
        subprocess.run(["ip", "link", "del", self.bridge], stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)


def one_run(cluster, build, fault, run_id, patience):
    """One run with `fault` on node 2: (to last survivor gone, to every
    record final, every record names node 2), seconds; None where it did
    not happen within `patience`."""
    tmp = tempfile.mkdtemp(prefix="run.", dir=cluster.dir)
    marks = os.path.join(tmp, "marks")
    os.mkdir(marks)
    train = [PYTHON, TRAIN, "--steps", "100000", "--step-seconds", "0.05", "--mark-dir", marks,
             "--timeout", "600"]
    if fault in ("crash", "hang"):
        train += ["--fail-rank", "5", "--fail-step", "10"] + (["--hang"] if fault == "hang" else [])
    env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS="1",
               PYTHONPATH=os.path.join(SOURCE, "worker_runtime", "python"))
    procs, reports = [], []
    for i, ns in enumerate(cluster.netns):
        report = os.path.join(tmp, f"node{i}.json")
        reports.append(report)
        argv = ["nsenter", f"--net=/run/netns/{ns}", "--", f"{build}/daemon/ltrun",
                "--rdzv", f"etcd://{cluster.addr(1)}:{cluster.port}", "--run-id", run_id,
                "--nnodes", str(NODES), "--node-rank", str(i), "--devices", "2",
                "--heartbeat-timeout", "5s", "--no-slurm", "--report", report,
                "--state-dir", os.path.join(tmp, f"state{i}"), "--"] + train
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    survivors = [r for r in range(2 * NODES) if r not in (4, 5)]
    try:
        pid_files = [os.path.join(marks, f"rank-{r}.pid") for r in range(2 * NODES)]
        if not wait_for(lambda: all(read(p) for p in pid_files), 180, every=0.01):
            return None, None, False
        pids = {r: int(read(pid_files[r])) for r in range(2 * NODES)}
        if fault == "kill":
            time.sleep(0.5)
            fault_at = time.time()
            for p in (procs[2].pid, pids[4], pids[5]):
                os.kill(p, signal.SIGKILL)
        else:
            if not wait_for(lambda: read(os.path.join(marks, "fault")), 60, every=0.005):
                return None, None, False
            fault_at = float(read(os.path.join(marks, "fault")))
        gone = wait_for(lambda: not any(alive(pids[r]) for r in survivors),
                        max(0.0, fault_at + patience - time.time()))
        gone_s = time.time() - fault_at if gone else None
        wanted = [reports[i] for i in range(NODES) if fault != "kill" or i != 2]
        final = wait_for(lambda: all(os.path.exists(r) for r in wanted),
                         max(0.0, fault_at + patience - time.time()))
        final_s = time.time() - fault_at if final else None
        right = final
        for r in wanted if final else []:
            with open(r) as f:
                cause = json.load(f).get("root_cause") or {}
            node = cause.get("node")
            right = right and (node == 2 or (node is None and r == reports[2]))
        return gone_s, final_s, right
    finally:
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for name in os.listdir(marks):
            if name.endswith(".pid"):
                try:
                    os.kill(int(read(os.path.join(marks, name))), signal.SIGKILL)
                except (ProcessLookupError, ValueError, TypeError):
                    pass
        # A SIGKILLed ltrun leaves its cgroups (ltd's sweep would remove them).
        subprocess.run(["/bin/sh", "-c",
                        f"for d in $(find /sys/fs/cgroup -type d -name 'run-ltrun{procs[2].pid}' "
                        f"2>/dev/null | sort -r); do find $d -depth -type d -exec rmdir {{}} \\; ; "
                        f"done"], stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)


def measure(build, runs, patience=60.0):
    """{fault: ([gone s], [final s], right count, runs)} for crash, hang, kill."""
    cluster = Cluster()
    out = {}
    try:
        for fault in ("crash", "hang", "kill"):
            gone, final, right = [], [], 0
            for k in range(runs):
                g, f, ok = one_run(cluster, build, fault, f"bench{os.getpid()}-{fault}-{k}",
                                   patience)
                if g is not None:
                    gone.append(g)
                if f is not None:
                    final.append(f)
                right += 1 if ok else 0
            out[fault] = (gone, final, right, runs)
    finally:
        cluster.stop()
    return out
