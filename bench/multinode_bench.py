#!/usr/bin/python3
"""Multi-node benchmark of ltd (issue 11): how fast a fault on node 1 ends
node 0's ranks, through each way a multi-node run can be held together.

A gloo job of 2 nodes x 2 ranks (tests/ranks/multinode_train.py); global
rank 3 (node 1) either exits 3 (crash) or stops outside any collective
(hang) at step 3, and the others block in their allreduce. Measured: from
the fault (the rank's own clock, just before it exits or stops) to the last
rank of node 0 gone (polled every millisecond), through:

  - the etcd fence (bench/etcd_fence_bench.py, when it exists);
  - Slurm with ltrun per node: `srun -N2 --ntasks-per-node=1
    --kill-on-bad-exit=1 ltrun --devices 2 ...` on a real two-node Slurm
    cluster on this machine (tests/slurm/cluster.sh);
  - Slurm with plain torchrun per node (python3 -m torch.distributed.run);
  - gloo alone: four bare processes, no launcher; the time gloo takes to
    notice its peer's death (a crash) or its own timeout (a hang).

For a hang, ltd's figure is --heartbeat-timeout plus the teardown, counted
from the hung rank's fault (node 0's own ranks, blocked in the allreduce,
stop beating at the same time, so node 0 may reach its verdict as early as
node 1); torchrun and gloo alone never notice one within the bench's
patience, so their row says "never (killed after X s)".

Then 4 nodes x 2 ranks, each node in a network namespace of its own
(bench/netns_run.py; as root): a crash, a hang outside a collective and a
SIGKILL of the whole of node 2, from the fault to the last survivor's rank
gone and to every node's final record, and whether every record names node
2 (the run's verdict waits for a better cause than a survivor's, up to the
lease TTL plus 1 s; the teardown does not).

Last, scale: 8 nodes x 1 rank the same way, the time from launching the
8 ltruns to the last rank started (the rendezvous) and to the process
group formed, and a crash on node 2 to every survivor gone.

Not a test: nothing is asserted; a shared 2-core machine is noisy.
With --munge: what sealing every etcd record with MUNGE costs, per record
(seal, check) and on the 4-node crash, --rdzv-auth none against munge
(bench/munge_bench.py, a munged of its own).

Usage: bench/multinode_bench.py [--build DIR] [--runs N] [--hang-timeout S] [--patience S]
                                [--four-nodes-only | --eight-nodes-only | --munge]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from local_slurm import LocalSlurm

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
TRAIN = os.path.join(SOURCE, "tests", "ranks", "multinode_train.py")
PYTHON = "/usr/bin/python3"


def alive(pid):
    """Alive and not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def wait_for(pred, timeout, every=0.001):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(every)
    return pred()


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


def watch(marks, node0_ranks, patience):
    """Seconds from the fault to the last of node 0's ranks gone; None when
    they outlive `patience` after the fault."""
    pid_files = [os.path.join(marks, f"rank-{r}.pid") for r in node0_ranks]
    if not wait_for(lambda: all(read(p) for p in pid_files) and read(os.path.join(marks, "fault")),
                    120, every=0.005):
        return None
    pids = [int(read(p)) for p in pid_files]
    fault = float(read(os.path.join(marks, "fault")))
    gone = wait_for(lambda: not any(alive(p) for p in pids), max(0.0, fault + patience - time.time()))
    return time.time() - fault if gone else None


def trainer_args(marks, hang):
    args = [TRAIN, "--steps", "100000", "--step-seconds", "0.02", "--fail-rank", "3",
            "--fail-step", "3", "--mark-dir", marks, "--timeout", "1800"]
    return args + (["--hang"] if hang else [])


def run_and_watch(argv, env, marks, hang, patience):
    """Starts argv (a whole run), measures, then ends whatever is left: a
    run left behind would hold the cluster's nodes, and the next srun wait."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        return watch(marks, [0, 1], patience)
    finally:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        if "SLURM_CONF" in env:  # this bench's own cluster
            subprocess.run(["scancel", "--user", "root", "--full"], env=env)
            wait_for(lambda: not subprocess.run(["squeue", "-h"], env=env, stdout=subprocess.PIPE,
                                                text=True).stdout.strip(), 60, every=0.2)
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        proc.wait()
        # Ranks left behind by a launcher that never noticed (a hang).
        for name in os.listdir(marks):
            if name.endswith(".pid"):
                try:
                    os.kill(int(read(os.path.join(marks, name))), 9)
                except (ProcessLookupError, ValueError, TypeError):
                    pass


def measure(make_argv, env, runs, hang, patience):
    times, never = [], 0
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="mn-bench.") as marks:
            os.chmod(marks, 0o777)
            t = run_and_watch(make_argv(marks), env, marks, hang, patience)
            if t is None:
                never += 1
            else:
                times.append(t)
    return times, never


def slurm_ltrun(build, hang_timeout):
    def argv(marks):
        return ["srun", "-N2", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
                f"{build}/daemon/ltrun", "--devices", "2", "--heartbeat-timeout", f"{hang_timeout}s",
                "--stack-budget", "0", "--", PYTHON, *trainer_args(marks, hang=False)]
    return argv


def slurm_torchrun():
    def argv(marks, hang=False):
        # Debian 12's torchrun (torch 1.13, Python 3.11) crashes on its default
        # --redirects/--tee 0; 1 parses. Node rank and master from Slurm.
        script = (
            f'exec {PYTHON} -m torch.distributed.run --nnodes 2 --nproc_per_node 2 '
            f'--node_rank "$SLURM_NODEID" --master_addr "${{SLURM_STEP_NODELIST%%,*}}" '
            f'--master_port $((20000 + SLURM_JOB_ID % 1000 * 10 + SLURM_STEP_ID % 10)) '
            f'--redirects 1 --tee 1 --log_dir "$MARKS/torchrun-$SLURM_NODEID" '
            f'"$@"')
        return ["srun", "-N2", "--ntasks-per-node=1", "--kill-on-bad-exit=1", "--export=ALL,MARKS=" + marks,
                "bash", "-c", script, "torchrun", *trainer_args(marks, hang)]
    return argv


def bare_gloo(marks, hang, port):
    """Four ranks with torchrun's variables and no launcher at all."""
    procs = []
    for rank in range(4):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank % 2), GROUP_RANK=str(rank // 2),
                   NODE_RANK=str(rank // 2), ROLE_RANK=str(rank), WORLD_SIZE="4", ROLE_WORLD_SIZE="4",
                   LOCAL_WORLD_SIZE="2", GROUP_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), TORCHELASTIC_RUN_ID="bare", OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([PYTHON, *trainer_args(marks, hang)], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return procs


def measure_bare(runs, hang, patience):
    import socket
    times, never = [], 0
    for _ in range(runs):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with tempfile.TemporaryDirectory(prefix="mn-bench.") as marks:
            procs = bare_gloo(marks, hang, port)
            try:
                t = watch(marks, [0, 1], patience)
            finally:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                    p.wait()
            if t is None:
                never += 1
            else:
                times.append(t)
    return times, never


def cell(times, never, patience):
    if not times:
        return f"never (killed after {patience:.0f} s)" if never else "no data"
    vals = sorted(t * 1000 for t in times)
    med = statistics.median(vals)
    text = f"{med:7.0f} ms (min {vals[0]:.0f}, max {vals[-1]:.0f}, n={len(vals)})"
    if never:
        text += f", {never} never"
    return text


def row(what, crash, hang):
    print(f"{what:<32}{crash:<46}  {hang}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--hang-timeout", type=float, default=3.0, help="ltrun --heartbeat-timeout, s")
    ap.add_argument("--patience", type=float, default=20.0, help="give up on a hang after this, s")
    ap.add_argument("--four-nodes-only", action="store_true", help="only the 4-node netns cases")
    ap.add_argument("--eight-nodes-only", action="store_true",
                    help="only the 8 nodes x 1 rank netns scale case (a crash)")
    ap.add_argument("--munge", action="store_true",
                    help="only MUNGE's cost: per record, and the 4-node crash with it on and off")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    if args.four_nodes_only:
        return netns_nodes(build, args.runs, 4, 2, ("crash", "hang", "kill"))
    if args.eight_nodes_only:
        return netns_nodes(build, args.runs, 8, 1, ("crash",))
    if args.munge:
        return munge_cost(build, args.runs)
    print(f"fault on node 1 (rank 3 of 2 nodes x 2 gloo ranks) -> last rank of node 0 gone; "
          f"ltrun --heartbeat-timeout {args.hang_timeout:g} s; medians of {args.runs}", flush=True)
    row("", "crash", "hang")

    try:
        sys.path.insert(0, HERE)
        import etcd_fence_bench  # optional: the fence's own bench
        f = etcd_fence_bench.measure_fence(build, args.runs)
        row("etcd fence + ltrun per node",
            f"{f['crash_to_node0_gone_ms']:.0f} ms (teardown starts at "
            f"{f['crash_to_node0_teardown_ms']:.0f})",
            f"{f['hang_last_beat_to_node0_gone_ms']:.0f} ms ({f['hang_timeout_ms']:.0f} ms timeout "
            f"+ {f['hang_verdict_to_node0_gone_ms']:.0f} ms from the verdict)")
    except ImportError:
        row("etcd fence", "(bench/etcd_fence_bench.py not here)", "")
    except Exception as e:  # its failure must not hide the rest
        row("etcd fence", f"failed: {e}", "")

    try:
        cluster = LocalSlurm(prefix="mn-bench-slurm.")
    except RuntimeError as e:
        cluster = None
        row("Slurm", f"skipped: {e}", "")
    if cluster is not None:
        try:
            ltrun = slurm_ltrun(build, args.hang_timeout)
            crash = measure(ltrun, cluster.env, args.runs, False, args.patience)

            def ltrun_hang(marks):
                return ltrun(marks)[:-len(trainer_args(marks, False))] + trainer_args(marks, True)
            hang = measure(ltrun_hang, cluster.env, args.runs, True, args.patience)
            row("Slurm -K1 + ltrun per node", cell(*crash, args.patience), cell(*hang, args.patience))
            tr = slurm_torchrun()
            crash = measure(lambda m: tr(m, False), cluster.env, args.runs, False, args.patience)
            hang = measure(lambda m: tr(m, True), cluster.env, 1, True, args.patience)
            row("Slurm -K1 + torchrun per node", cell(*crash, args.patience), cell(*hang, args.patience))
        finally:
            cluster.stop()

    crash = measure_bare(args.runs, False, args.patience)
    hang = measure_bare(1, True, args.patience)
    row("gloo alone (no launcher)", cell(*crash, args.patience), cell(*hang, args.patience))
    netns_nodes(build, args.runs, 4, 2, ("crash", "hang", "kill"))
    netns_nodes(build, args.runs, 8, 1, ("crash",))


def munge_cost(build, runs):
    """What sealing every record with MUNGE costs (munge_bench.py)."""
    sys.path.insert(0, HERE)
    import munge_bench
    try:
        munged = munge_bench.Munged()
    except (OSError, RuntimeError, subprocess.CalledProcessError) as e:
        print(f"MUNGE: skipped ({e})")
        return
    try:
        enc, dec, size = munge_bench.record_cost(munged.socket)
        print(f"one record (1 KiB report, {size} B sealed): seal {enc:.0f} us, check {dec:.0f} us "
              f"(medians of 300, a munged of the bench's own)", flush=True)
        for auth in ("none", "munge"):
            netns_nodes(build, runs, 4, 2, ("crash",),
                        ["--rdzv-auth", auth, "--munge-socket", munged.socket],
                        f"--rdzv-auth {auth}")
    finally:
        munged.stop()


def netns_nodes(build, runs, nodes, ranks_per_node, faults, flags=(), title=""):
    """Runs of `nodes` x `ranks_per_node` in network namespaces
    (bench/netns_run.py), a fault on node 2 each."""
    print(f"\n{nodes} nodes x {ranks_per_node} rank(s), a network namespace each, etcd fence, "
          f"ltrun --heartbeat-timeout 5s, lease 5 s; fault on node 2; medians of {runs}"
          f"{'; ' + title if title else ''}", flush=True)
    if os.getuid() != 0:
        print("skipped: needs root (network namespaces)")
        return
    sys.path.insert(0, HERE)
    import netns_run
    try:
        results = netns_run.measure(build, runs, nodes, ranks_per_node, faults, flags=flags)
    except Exception as e:  # noqa: BLE001 (a bench reports, it does not crash)
        print(f"skipped: {e}")
        return
    starts = [r for fault_runs in results.values() for r in fault_runs]
    for what, key in (("rendezvous (last rank started)", "rdzv"),
                      ("process group formed", "group")):
        times = [r[key] for r in starts if r[key] is not None]
        print(f"{what:<34}{cell(times, len(starts) - len(times), 180)}", flush=True)
    print(f"{'fault':<10}{'to last survivor gone':<40}{'to every record final':<40}named node 2",
          flush=True)
    for fault, rs in results.items():
        gone = [r["gone"] for r in rs if r["gone"] is not None]
        final = [r["final"] for r in rs if r["final"] is not None]
        right = sum(1 for r in rs if r["right"])
        n = len(rs)
        print(f"{fault:<10}{cell(gone, n - len(gone), 60):<40}{cell(final, n - len(final), 60):<40}"
              f"{right} of {n}", flush=True)


if __name__ == "__main__":
    main()
