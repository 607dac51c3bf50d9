"""A real torch.distributed DDP job on gloo where one rank stops.

Every rank trains a tiny model under DistributedDataParallel and beats
with its step. At --hang-step, rank --hang-rank stops in
`rank_stalls_outside_collective` (or, with --stop-rank, stops itself with
SIGSTOP); the others block in DDP's gradient allreduce, as in a real hang. Without a hang it trains to the end.
"""
import argparse
import os
import signal
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import ltworker


def rank_stalls_outside_collective():
    while True:
        time.sleep(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--hang-step", type=int, default=-1)
    p.add_argument("--stop-rank", type=int, default=-1, help="SIGSTOPs itself at --hang-step")
    args = p.parse_args()

    dist.init_process_group("gloo")  # env:// from ltd's torchrun variables
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(args.steps):
        if rank == args.hang_rank and step == args.hang_step:
            rank_stalls_outside_collective()
        if rank == args.stop_rank and step == args.hang_step:
            os.kill(os.getpid(), signal.SIGSTOP)  # as a Ctrl-Z or a debugger would
        x = torch.randn(16, 8)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # DDP allreduces the gradients here
        opt.step()
        ltworker.heartbeat(step)
    dist.barrier()
    if rank == 0:
        print(f"trained {args.steps} steps on {dist.get_world_size()} ranks", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
