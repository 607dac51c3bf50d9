"""A 2-node run over torchrun's c10d rendezvous with no etcd deployed:
`ltrun --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint
NODE0:29400 train.py` on each node, each node in a network namespace of its
own on a bridge made here (10.214.N.0/24). Node 0 hosts the rendezvous (its
address is the endpoint's); node 1 meets it there. Node 1's local rank 1
(global rank 3) exits 3: both nodes' records and failure lines must name it,
and every rank must have seen the run's RANK, WORLD_SIZE and MASTER_ADDR.
As root with ip, nsenter and etcd, else skipped (exit 77). The namespaces,
the bridge and every process are removed, whatever happened.

usage: c10d_netns_test.py LTRUN
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LTRUN = sys.argv[1]
SKIP = 77


def sh(cmd):
    subprocess.run(["/bin/sh", "-c", cmd], check=True, stdout=subprocess.DEVNULL)


def main():
    if os.geteuid() != 0:
        print("skipped: needs root (network namespaces)")
        return SKIP
    for tool in ("/usr/bin/nsenter", "/usr/bin/etcd"):
        if not os.access(tool, os.X_OK):
            print(f"skipped: {tool} is not installed")
            return SKIP
    if not shutil.which("ip"):
        print("skipped: ip (iproute2) is not installed")
        return SKIP
    tag = os.getpid() % 100000
    net = os.getpid() % 250 + 1
    bridge = f"ltcb{tag}"
    netns = [f"ltcn{tag}-{i}" for i in range(2)]
    addr = lambda host: f"10.214.{net}.{host}"  # noqa: E731
    d = tempfile.mkdtemp(prefix="ltrun-c10d-netns.")
    procs = []
    problems = []
    try:
        sh(f"ip link add {bridge} type bridge && ip addr add {addr(1)}/24 dev {bridge} && "
           f"ip link set {bridge} up")
        for i, ns in enumerate(netns):
            veth = f"ltcv{tag}-{i}"
            sh(f"ip netns add {ns} && ip link add {veth} type veth peer name eth0 netns {ns} && "
               f"ip link set {veth} master {bridge} up && "
               f"ip -n {ns} addr add {addr(10 + i)}/24 dev eth0 && "
               f"ip -n {ns} link set eth0 up && ip -n {ns} link set lo up")
        shutil.copy(os.path.join(HERE, "check_rank.py"), os.path.join(d, "train.py"))
        env = {"PATH": "/usr/bin:/bin", "HOME": d, "TMPDIR": d, "LT_CHECK_DIR": d,
               "LT_CHECK_DO": "crash", "LT_CHECK_CRASH_RANK": "3"}
        endpoint = f"{addr(10)}:29400"
        for i, ns in enumerate(netns):
            argv = ["/usr/bin/nsenter", f"--net=/run/netns/{ns}", "--", LTRUN, "--nnodes=2",
                    "--nproc-per-node=2", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}",
                    f"--rdzv-id=c10d{tag}", "--no-slurm", "--report",
                    os.path.join(d, f"node{i}.json"), "train.py"]
            procs.append(subprocess.Popen(argv, cwd=d, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, errors="replace"))
        said = []
        for i, p in enumerate(procs):
            try:
                out, err = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
                problems.append(f"node {i}'s ltrun did not end within 120 s")
            said.append(err)
            if p.returncode == 0:
                problems.append(f"node {i} ended with 0")
        for i in range(2):
            line = [l for l in said[i].splitlines() if l.startswith("ltrun: job ")]
            if not line or "node 1" not in line[0] or "rank 1" not in line[0]:
                problems.append(f"node {i}'s failure line does not name node 1 rank 1: {line}")
            try:
                with open(os.path.join(d, f"node{i}.json")) as f:
                    cause = json.load(f).get("root_cause", {})
            except (OSError, ValueError) as e:
                problems.append(f"node {i} wrote no record: {e}")
                continue
            if cause.get("node") != 1 or cause.get("rank") != 1 or cause.get("exit_code") != 3:
                problems.append(f"node {i}'s root cause is not node 1 rank 1 exit 3: {cause}")
        seen = {}
        for name in os.listdir(d):
            if name.startswith("rank-"):
                with open(os.path.join(d, name)) as f:
                    e = json.load(f)["env"]
                seen[int(e["RANK"])] = e
        if sorted(seen) != [0, 1, 2, 3]:
            problems.append(f"ranks that ran: {sorted(seen)}, want 0..3")
        for rank, e in seen.items():
            if e.get("WORLD_SIZE") != "4" or e.get("TORCHELASTIC_RUN_ID") != f"c10d{tag}":
                problems.append(f"rank {rank}: WORLD_SIZE {e.get('WORLD_SIZE')}, run id "
                                f"{e.get('TORCHELASTIC_RUN_ID')}")
            if e.get("MASTER_ADDR") != seen.get(0, {}).get("MASTER_ADDR"):
                problems.append(f"rank {rank}: MASTER_ADDR {e.get('MASTER_ADDR')} is not rank 0's")
        if problems:
            for i, s in enumerate(said):
                print(f"---- node {i} said:\n{s}")
    except subprocess.CalledProcessError as e:
        problems.append(f"cannot make the namespaces: {e}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for ns in netns:
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
        subprocess.run(["ip", "link", "del", bridge], stderr=subprocess.DEVNULL)
        shutil.rmtree(d, ignore_errors=True)
    for p in problems:
        print(f"FAIL: {p}")
    if not problems:
        print("ok: a crash on node 1 of a c10d run is named on both nodes")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
