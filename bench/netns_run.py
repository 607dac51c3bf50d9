"""A run of several nodes on one machine for bench/multinode_bench.py: each
node an ltrun in a network namespace of its own on a bridge made here
(10.213.N.0/24), gloo ranks (tests/ranks/multinode_train.py), a real etcd
on the bridge's address. 4 nodes x 2 ranks, or 8 x 1 for scale. Faults on
node 2, on its last rank: it exits 3 (crash), it stops outside any
collective (hang), or node 2's ltrun and ranks are SIGKILLed at once
(kill). Measured from the launch: the rendezvous (the last rank process
started by its ltrun, from /proc) and the process group formed (the last
rank's pid mark, written after init_process_group). Measured from the fault
(the rank's own clock, or the kill): the last survivor's rank gone (polled
every millisecond), and every node's final record written (its --report
file, which ltrun writes once the run's root cause is chosen), with whether
every record names node 2. As root, with ip, nsenter and etcd; everything
made is removed at the end, whatever happened.
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
FAULT_NODE = 2


def sh(cmd):
    subprocess.run(["/bin/sh", "-c", cmd], check=True, stdout=subprocess.DEVNULL)


class Cluster:
    """The bridge, the namespaces and etcd; stop() removes them."""

    def __init__(self, nodes):
        tag = os.getpid() % 100000
        self.net = os.getpid() % 250 + 1
        self.bridge = f"ltbb{tag}"
        self.netns = [f"ltbn{tag}-{i}" for i in range(nodes)]
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


def start_time(pid):
    """When a process started, seconds since the epoch: /proc gives it in
    clock ticks since boot (btime, whole seconds, would be too coarse)."""
    with open(f"/proc/{pid}/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    since_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.time() - (since_boot - ticks / os.sysconf("SC_CLK_TCK"))


def one_run(cluster, build, fault, run_id, patience, ranks_per_node, flags=()):
    """One run with `fault` on node 2: {"rdzv", "group", "gone", "final"}
    (seconds; None where it did not happen within `patience`) and "right"
    (every record names node 2)."""
    nodes = len(cluster.netns)
    world = nodes * ranks_per_node
    node_ranks = range(FAULT_NODE * ranks_per_node, (FAULT_NODE + 1) * ranks_per_node)
    fail_rank = node_ranks[-1]
    out = {"rdzv": None, "group": None, "gone": None, "final": None, "right": False}
    tmp = tempfile.mkdtemp(prefix="run.", dir=cluster.dir)
    marks = os.path.join(tmp, "marks")
    os.mkdir(marks)
    train = [PYTHON, TRAIN, "--steps", "100000", "--step-seconds", "0.05", "--mark-dir", marks,
             "--timeout", "600"]
    if fault in ("crash", "hang"):
        train += ["--fail-rank", str(fail_rank), "--fail-step", "10"]
        train += ["--hang"] if fault == "hang" else []
    env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0", OMP_NUM_THREADS="1",
               PYTHONPATH=os.path.join(SOURCE, "worker_runtime", "python"))
    procs, reports = [], []
    launched = time.time()
    for i, ns in enumerate(cluster.netns):
        report = os.path.join(tmp, f"node{i}.json")
        reports.append(report)
        argv = ["nsenter", f"--net=/run/netns/{ns}", "--", f"{build}/daemon/ltrun",
                "--rdzv", f"etcd://{cluster.addr(1)}:{cluster.port}", "--run-id", run_id,
                "--nnodes", str(nodes), "--node-rank", str(i), "--devices", str(ranks_per_node),
                "--heartbeat-timeout", "5s", "--no-slurm", "--report", report,
                "--state-dir", os.path.join(tmp, f"state{i}"), *flags, "--"] + train
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    survivors = [r for r in range(world) if r not in node_ranks]
    try:
        pid_files = [os.path.join(marks, f"rank-{r}.pid") for r in range(world)]
        if not wait_for(lambda: all(read(p) for p in pid_files), 180, every=0.01):
            return out
        out["group"] = time.time() - launched
        pids = {r: int(read(pid_files[r])) for r in range(world)}
        out["rdzv"] = max(start_time(p) for p in pids.values()) - launched
        if fault == "kill":
            time.sleep(0.5)
            fault_at = time.time()
            for p in [procs[FAULT_NODE].pid] + [pids[r] for r in node_ranks]:
                os.kill(p, signal.SIGKILL)
        else:
            if not wait_for(lambda: read(os.path.join(marks, "fault")), 60, every=0.005):
                return out
            fault_at = float(read(os.path.join(marks, "fault")))
        if wait_for(lambda: not any(alive(pids[r]) for r in survivors),
                    max(0.0, fault_at + patience - time.time())):
            out["gone"] = time.time() - fault_at
        wanted = [reports[i] for i in range(nodes) if fault != "kill" or i != FAULT_NODE]
        if wait_for(lambda: all(os.path.exists(r) for r in wanted),
                    max(0.0, fault_at + patience - time.time())):
            out["final"] = time.time() - fault_at
        right = out["final"] is not None
        for r in wanted if right else []:
            with open(r) as f:
                cause = json.load(f).get("root_cause") or {}
            node = cause.get("node")
            right = right and (node == FAULT_NODE or (node is None and r == reports[FAULT_NODE]))
        out["right"] = right
        return out
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
        killed = procs[FAULT_NODE].pid
        subprocess.run(["/bin/sh", "-c",
                        f"for d in $(find /sys/fs/cgroup -type d -name 'run-ltrun{killed}' "
                        f"2>/dev/null | sort -r); do find $d -depth -type d -exec rmdir {{}} \\; ; "
                        f"rmdir $(dirname $d); done"], stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)


def measure(build, runs, nodes=4, ranks_per_node=2, faults=("crash", "hang", "kill"),
            patience=60.0, flags=()):
    """{fault: [one_run's dict per run]}; `flags`: more of ltrun's (--rdzv-auth)."""
    cluster = Cluster(nodes)
    out = {}
    try:
        for fault in faults:
            out[fault] = [one_run(cluster, build, fault, f"bench{os.getpid()}-{fault}-{k}", patience,
                                  ranks_per_node, flags) for k in range(runs)]
    finally:
        cluster.stop()
    return out
