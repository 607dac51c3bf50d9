"""The kit's DDP rank: a small model trained with torch.distributed on gloo
(CPU) or NCCL (one GPU a rank), started by ltd or ltrun with torchrun's
environment. It never imports ltd or ltworker: ltd's automatic heartbeats
must watch it as they would any script.

  --crash-rank R --crash-step S   rank R raises at step S
  --stall-rank R --stall-step S   rank R sleeps forever at step S, outside
                                  any collective; the others go on into the
                                  next step's collectives and wait there
  --pg-timeout SECONDS            the process group's timeout (NCCL's
                                  watchdog aborts a collective past it)

Each step ends in a barrier, so a rank waiting for a stalled peer waits
inside torch.distributed. Fault times are printed as "EVENT at EPOCH" for
the check script's figures.
"""
import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def stall_outside_collective(rank):
    print("rank %d stall at %.3f" % (rank, time.time()), flush=True)
    while True:
        time.sleep(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--crash-rank", type=int, default=-1)
    p.add_argument("--crash-step", type=int, default=-1)
    p.add_argument("--stall-rank", type=int, default=-1)
    p.add_argument("--stall-step", type=int, default=-1)
    p.add_argument("--pg-timeout", type=float, default=0)
    a = p.parse_args()

    kwargs = {}
    if a.pg_timeout:
        kwargs["timeout"] = datetime.timedelta(seconds=a.pg_timeout)
    device = None
    if a.backend == "nccl":
        local = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        kwargs["device_id"] = device
    try:
        dist.init_process_group(a.backend, **kwargs)
    except TypeError:  # a torch without device_id
        kwargs.pop("device_id", None)
        dist.init_process_group(a.backend, **kwargs)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 1)
    if device is not None:
        model = model.to(device)
        ddp = DistributedDataParallel(model, device_ids=[device.index])
    else:
        ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    for step in range(1, a.steps + 1):
        if rank == a.crash_rank and step == a.crash_step:
            print("rank %d crash at %.3f" % (rank, time.time()), flush=True)
            raise RuntimeError("kit crash on rank %d at step %d" % (rank, step))
        if rank == a.stall_rank and step == a.stall_step:
            stall_outside_collective(rank)
        x = torch.full((32, 64), float(rank + step), device=device)
        opt.zero_grad()
        ddp(x).pow(2).mean().backward()
        opt.step()
        dist.barrier()
    weights = sum(p.sum().item() for p in ddp.parameters())
    print("rank %d of %d %s torch %s weights %.6f" % (rank, dist.get_world_size(), a.backend,
                                                       torch.__version__, weights), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
