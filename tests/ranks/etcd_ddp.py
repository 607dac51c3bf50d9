"""A torch.distributed DDP job on gloo for multi-node runs over etcd.

Every rank trains a tiny model under DistributedDataParallel and beats
with its step. --crash-rank (a global RANK) exits 3 at --crash-step,
--hang-rank stops there outside any collective; both only in the first
attempt (TORCHELASTIC_RESTART_COUNT 0) with --first-attempt-only.
--step-sleep slows every step down.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import ltworker


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--crash-rank", type=int, default=-1)
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--fault-step", type=int, default=3)
    p.add_argument("--first-attempt-only", action="store_true")
    p.add_argument("--step-sleep", type=float, default=0.0)
    args = p.parse_args()

    dist.init_process_group("gloo")  # env:// from ltd's torchrun variables
    rank = dist.get_rank()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    faults = restart == 0 or not args.first_attempt_only
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(args.steps):
        if faults and step == args.fault_step:
            if rank == args.crash_rank:
                print(f"rank {rank} crashes at step {step}", flush=True)
                os._exit(3)
            if rank == args.hang_rank:
                while True:
                    time.sleep(1)
        loss = model(torch.randn(16, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # DDP allreduces the gradients here, across nodes
        opt.step()
        ltworker.heartbeat(step)
        time.sleep(args.step_sleep)
    dist.barrier()
    if rank == 0:
        print(f"trained {args.steps} steps on {dist.get_world_size()} ranks "
              f"(restart {restart})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
