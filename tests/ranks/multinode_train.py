"""A real torch.distributed job on gloo across the nodes of a multi-node run.

Every rank checks that its torchrun environment adds up (RANK is
GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK, WORLD_SIZE is GROUP_WORLD_SIZE *
LOCAL_WORLD_SIZE, and Lightning would take the launch for torchrun's), joins
the process group through MASTER_ADDR:MASTER_PORT, and allreduces its rank
each step (the sum proves every rank of every node took part). At
--fail-step, global rank --fail-rank exits with --exit-code, or stops
outside any collective with --hang (the others block in the allreduce, as
in a real hang). Prints one "multinode ok" line per rank when done.

Under ltd each step is a heartbeat on LT_HEARTBEAT_FD. For the bench,
--mark-dir DIR gets each rank's pid (rank-R.pid, once the group formed)
and the failing rank's time of failure (fault, seconds since the epoch).
"""
import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist


def env_int(name):
    return int(os.environ[name])


def check_environment():
    rank, local, node = env_int("RANK"), env_int("LOCAL_RANK"), env_int("GROUP_RANK")
    local_world, nodes = env_int("LOCAL_WORLD_SIZE"), env_int("GROUP_WORLD_SIZE")
    problems = []
    if rank != node * local_world + local:
        problems.append(f"RANK {rank} != GROUP_RANK {node} * LOCAL_WORLD_SIZE {local_world} + LOCAL_RANK {local}")
    if env_int("WORLD_SIZE") != nodes * local_world:
        problems.append(f"WORLD_SIZE {env_int('WORLD_SIZE')} != {nodes} * {local_world}")
    if env_int("ROLE_RANK") != rank or env_int("ROLE_WORLD_SIZE") != env_int("WORLD_SIZE"):
        problems.append("ROLE_RANK/ROLE_WORLD_SIZE differ from RANK/WORLD_SIZE")
    if "NODE_RANK" in os.environ and env_int("NODE_RANK") != node:  # ltd's; torchrun sets none
        problems.append("NODE_RANK differs from GROUP_RANK")
    # Lightning's TorchElasticEnvironment.detect(): older releases ask for
    # these four variables, newer ones torch.distributed.is_torchelastic_launched()
    # (TORCHELASTIC_RUN_ID set); it comes before SLURMEnvironment in the
    # order Lightning tries, so a run under srun is still taken for torchrun's.
    for name in ("RANK", "GROUP_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        if name not in os.environ:
            problems.append(f"{name} missing: Lightning would not detect torchrun")
    if not dist.is_torchelastic_launched():
        problems.append("torch.distributed.is_torchelastic_launched() is False")
    if problems:
        print("bad environment: " + "; ".join(problems), file=sys.stderr, flush=True)
        sys.exit(2)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--fail-rank", type=int, default=-1, help="global rank that fails")
    p.add_argument("--fail-step", type=int, default=0)
    p.add_argument("--exit-code", type=int, default=3)
    p.add_argument("--hang", action="store_true", help="the failing rank hangs instead")
    p.add_argument("--step-seconds", type=float, default=0.0)
    p.add_argument("--timeout", type=float, default=120, help="gloo's own timeout, seconds")
    p.add_argument("--mark-dir", help="write pids and the fault time here (bench)")
    args = p.parse_args()

    def mark(name, text):
        if args.mark_dir:
            tmp = os.path.join(args.mark_dir, f".{name}.{os.getpid()}")
            with open(tmp, "w") as f:
                f.write(text)
            os.rename(tmp, os.path.join(args.mark_dir, name))

    heartbeat_fd = int(os.environ["LT_HEARTBEAT_FD"]) if "LT_HEARTBEAT_FD" in os.environ else None

    check_environment()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    assert rank == env_int("RANK") and world == env_int("WORLD_SIZE")
    mark(f"rank-{rank}.pid", str(os.getpid()))
    for step in range(args.steps):
        if rank == args.fail_rank and step == args.fail_step:
            if args.hang:
                print(f"rank {rank} hangs at step {step}", flush=True)
                mark("fault", repr(time.time()))
                while True:
                    time.sleep(1)
            print(f"rank {rank} fails at step {step}", flush=True)
            mark("fault", repr(time.time()))
            os._exit(args.exit_code)
        t = torch.tensor([float(rank)])
        dist.all_reduce(t)
        assert t.item() == world * (world - 1) / 2, t.item()
        if heartbeat_fd is not None:
            os.write(heartbeat_fd, f"hb {step}\n".encode())
        if args.step_seconds:
            time.sleep(args.step_seconds)
    dist.barrier()
    print(
        f"multinode ok rank={rank} world={world} node={os.environ['GROUP_RANK']} "
        f"local={os.environ['LOCAL_RANK']} run={os.environ['TORCHELASTIC_RUN_ID']}",
        flush=True,
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
