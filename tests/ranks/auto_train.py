"""An unmodified torch.distributed (gloo) training script: it never imports
ltworker. ltd's automatic heartbeats must watch it on their own.

Faults, for the tests of automatic hang detection:
  --hang-rank R --hang-step S     rank R blocks forever in time.sleep at step S
  --slow-rank R --slow-step S --slow-seconds T
                                  at step S rank R spends T seconds in a slow
                                  Python "checkpoint" loop while the others
                                  wait in a barrier
  --mismatch-step S               at step S rank 0 calls all_reduce, the
                                  others barrier: the collectives disagree
  --raise-rank R --raise-step S   rank R raises an uncaught exception
  --loader                        batches come from a DataLoader with two
                                  worker processes
  --until-file PATH               train (up to --steps) until PATH exists;
                                  every rank stops at the same step
"""
import argparse
import hashlib
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def stall_outside_collective():
    print(f"rank {dist.get_rank()} stalls at {time.time():.3f}", flush=True)
    while True:
        time.sleep(1)


def slow_checkpoint(seconds):
    data = b"checkpoint"
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        data = hashlib.sha256(data).digest()
    return data


class Batches(torch.utils.data.Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        return torch.full((8,), float(i % 7))


def worker_init(_worker_id):
    # A DataLoader worker is a fork of the rank: ltd's module must be off in
    # it, or the worker would report as the rank.
    module = sys.modules.get("ltd_autoheartbeat")
    if module is not None and module._active:
        raise RuntimeError("automatic heartbeats are active in a DataLoader worker")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--hang-step", type=int, default=-1)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-step", type=int, default=-1)
    p.add_argument("--slow-seconds", type=float, default=0)
    p.add_argument("--mismatch-step", type=int, default=-1)
    p.add_argument("--raise-rank", type=int, default=-1)
    p.add_argument("--raise-step", type=int, default=-1)
    p.add_argument("--loader", action="store_true")
    p.add_argument("--until-file", default="")
    args = p.parse_args()

    if os.environ.get("USER_SITECUSTOMIZE_RAN"):
        print("the user's sitecustomize ran", flush=True)
    dist.init_process_group("gloo")  # env:// from ltd's torchrun variables
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = None
    if args.loader:
        loader = torch.utils.data.DataLoader(Batches(), batch_size=16, num_workers=2,
                                             worker_init_fn=worker_init)
        batches = iter(loader)
    for step in range(args.steps):
        if rank == args.hang_rank and step == args.hang_step:
            stall_outside_collective()
        if step == args.slow_step:
            if rank == args.slow_rank:
                slow_checkpoint(args.slow_seconds)
            dist.barrier()
        if step == args.mismatch_step:
            if rank == 0:
                dist.all_reduce(torch.ones(4))
            else:
                dist.barrier()
        if rank == args.raise_rank and step == args.raise_step:
            raise RuntimeError(f"injected failure in rank {rank} at step {step}")
        if args.until_file:
            stop = torch.tensor([1.0 if os.path.exists(args.until_file) else 0.0])
            dist.all_reduce(stop, op=dist.ReduceOp.MAX)
            if stop.item() > 0:
                break
        x = next(batches) if batches is not None else torch.randn(16, 8)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # DDP allreduces the gradients here
        opt.step()
    dist.barrier()
    if rank == 0:
        print(f"trained {args.steps} steps on {dist.get_world_size()} ranks", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
