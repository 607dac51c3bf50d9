"""A 2-node run over torchrun's c10d rendezvous with no etcd deployed:
`ltrun --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint
NODE0:29400 train.py` on each node, each node in a network namespace of its
own on a bridge made here (10.214.N.0/24). Node 0 hosts the rendezvous (its
address is the endpoint's); node 1 meets it there. Node 1's local rank 1
(global rank 3) exits 3: both nodes' records and failure lines must name it,
and every rank must have seen the run's RANK, WORLD_SIZE and MASTER_ADDR.
Then the hosting node's ltrun is SIGKILLed mid-run: the rendezvous dies
with it, and the other node must end its job blaming the host's node.
As root with ip, nsenter and etcd, else skipped (exit 77). The namespaces,
the bridge and every process are removed, whatever happened.

usage: c10d_netns_test.py LTRUN
"""

import json
import os
import shutil
import subprocess
import sys
import signal
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LTRUN = sys.argv[1]
SKIP = 77


def sh(cmd):
    subprocess.run(["/bin/sh", "-c", cmd], check=True, stdout=subprocess.DEVNULL)


def start(d, netns, addr, tag, procs, run, do, extra_env=None, flags=()):
    """Both nodes' ltruns, the same line; the first namespace's address is
    the endpoint, so its ltrun hosts the rendezvous."""
    endpoint = f"{addr(10)}:29400"
    started = []
    for i, ns in enumerate(netns):
        env = {"PATH": "/usr/bin:/bin", "HOME": d, "TMPDIR": d, "LT_CHECK_DIR": f"{d}/{run}",
               "LT_CHECK_DO": do, "LT_CHECK_NS": str(i)}
        env.update(extra_env or {})
        argv = ["/usr/bin/nsenter", f"--net=/run/netns/{ns}", "--", LTRUN, "--nnodes=2",
                "--nproc-per-node=2", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}",
                f"--rdzv-id={run}{tag}", "--no-slurm", "--rdzv-lease=2s", "--report",
                os.path.join(d, run, f"node{i}.json"), *flags, "train.py"]
        p = subprocess.Popen(argv, cwd=d, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, errors="replace")
        procs.append(p)
        started.append(p)
    return started


def ranks_of(d):
    seen = {}
    for name in os.listdir(d):
        if name.startswith("rank-"):
            with open(os.path.join(d, name)) as f:
                r = json.load(f)
            seen[int(r["env"]["RANK"])] = r
    return seen


def kill_ranks(d):
    """Ranks a SIGKILLed ltrun left (process-group containment): by pid."""
    for root, _, files in os.walk(d):
        for name in files:
            if not name.startswith("rank-"):
                continue
            try:
                with open(os.path.join(root, name)) as f:
                    os.kill(json.load(f)["pid"], signal.SIGKILL)
            except (OSError, ValueError, KeyError):
                pass


def wait_for(cond, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def failure_line(err):
    lines = [l for l in err.splitlines() if l.startswith("ltrun: job ")]
    return lines[0] if lines else ""


def crash_named(d, netns, addr, tag, procs):
    """Node 1's local rank 1 (global rank 3) exits 3: both nodes name it."""
    run = "crash"
    os.mkdir(os.path.join(d, run))
    problems = []
    nodes = start(d, netns, addr, tag, procs, run, "crash", {"LT_CHECK_CRASH_RANK": "3"})
    said = []
    for i, p in enumerate(nodes):
        try:
            _, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            problems.append(f"{run}: namespace {i}'s ltrun did not end within 120 s")
        said.append(err)
        if p.returncode == 0:
            problems.append(f"{run}: namespace {i} ended with 0")
    # The rendezvous numbers the nodes as they come (as torchrun's c10d
    # does): the node that failed is the one where RANK 3 ran.
    for i in range(2):
        line = failure_line(said[i])
        if not line.startswith("ltrun: job FAILED on node "):
            problems.append(f"{run}: namespace {i}'s ltrun printed no failure line")
            continue
        node = int(line.split("on node ")[1].split()[0])
        named = "(global rank 3): rank 1 exited with code 3" if node == 1 else \
            "node 1 rank 3: rank 1 exited with code 3"
        if named not in line:
            problems.append(f"{run}: node {node}'s failure line does not name node 1's rank 1: "
                            f"{line}")
        try:
            with open(os.path.join(d, run, f"node{i}.json")) as f:
                cause = json.load(f).get("root_cause", {})
        except (OSError, ValueError) as e:
            problems.append(f"{run}: namespace {i} wrote no record: {e}")
            continue
        if cause.get("node") not in (1, None) or cause.get("rank") != 1 or \
                cause.get("exit_code") != 3 or (cause.get("node") is None) != (node == 1):
            problems.append(f"{run}: node {node}'s root cause is not node 1 rank 1 exit 3: {cause}")
    seen = {r: e["env"] for r, e in ranks_of(os.path.join(d, run)).items()}
    if sorted(seen) != [0, 1, 2, 3]:
        problems.append(f"{run}: ranks that ran: {sorted(seen)}, want 0..3")
    for rank, e in seen.items():
        if e.get("WORLD_SIZE") != "4" or e.get("TORCHELASTIC_RUN_ID") != f"{run}{tag}":
            problems.append(f"{run}: rank {rank}: WORLD_SIZE {e.get('WORLD_SIZE')}, run id "
                            f"{e.get('TORCHELASTIC_RUN_ID')}")
        if e.get("MASTER_ADDR") != seen.get(0, {}).get("MASTER_ADDR"):
            problems.append(f"{run}: rank {rank}: MASTER_ADDR {e.get('MASTER_ADDR')} is not "
                            "rank 0's")
    if problems:
        for i, s in enumerate(said):
            print(f"---- {run}: namespace {i} said:\n{s}")
    return problems


def host_dies(d, netns, addr, tag, procs):
    """The hosting node's ltrun is SIGKILLed with its ranks running: the
    rendezvous goes with it, and the other node ends its job, blaming it."""
    run = "hostdies"
    os.mkdir(os.path.join(d, run))
    problems = []
    # Process groups, not cgroups: a SIGKILLed ltrun cannot remove its
    # cgroup, and the test kills what it left by pid.
    nodes = start(d, netns, addr, tag, procs, run, "wait", flags=["--containment=process-group"])
    if not wait_for(lambda: len(ranks_of(os.path.join(d, run))) == 4, 60):
        return [f"{run}: the 4 ranks did not all start"]
    seen = ranks_of(os.path.join(d, run))
    host_node = next(int(r["env"]["GROUP_RANK"]) for r in seen.values() if r["ns"] == "0")
    nodes[0].kill()
    nodes[0].communicate()
    for r in seen.values():  # what the host's death took with it
        if r["ns"] == "0":
            try:
                os.kill(r["pid"], signal.SIGKILL)
            except OSError:
                pass
    try:
        _, err = nodes[1].communicate(timeout=45)
    except subprocess.TimeoutExpired:
        nodes[1].kill()
        _, err = nodes[1].communicate()
        return [f"{run}: the other node's ltrun did not end within 45 s of the host's death"]
    line = failure_line(err)
    if nodes[1].returncode == 0 or f"node {host_node}" not in line:
        problems.append(f"{run}: the other node ended {nodes[1].returncode} without blaming "
                        f"node {host_node} (the host): {line!r}\n{err}")
    left = [r["pid"] for r in seen.values() if r["ns"] == "1" and
            os.path.exists(f"/proc/{r['pid']}")]
    if left and not wait_for(lambda: not any(os.path.exists(f"/proc/{p}") for p in left), 15):
        problems.append(f"{run}: the other node's ranks outlived its ltrun")
    return problems


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
        problems += crash_named(d, netns, addr, tag, procs)
        problems += host_dies(d, netns, addr, tag, procs)
    except subprocess.CalledProcessError as e:
        problems.append(f"cannot make the namespaces: {e}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        kill_ranks(d)
        for ns in netns:
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
        subprocess.run(["ip", "link", "del", bridge], stderr=subprocess.DEVNULL)
        shutil.rmtree(d, ignore_errors=True)
    for p in problems:
        print(f"FAIL: {p}")
    if not problems:
        print("ok: a crash on node 1 of a c10d run is named on both nodes, and the host's death "
              "on the other")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
