"""NCCL's watchdog on a one-rank communicator: a collective queued behind a
GPU kernel that spins far longer than the process group's timeout never
completes, so PyTorch's NCCL watchdog must abort the communicator and end
the process (TORCH_NCCL_ASYNC_ERROR_HANDLING's default), and ltd must see a
failed rank and tear the job down.
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    timeout = float(sys.argv[1]) if len(sys.argv) > 1 else 15
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=timeout))
    t = torch.ones(1024, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    print("rank %d stall at %.3f" % (dist.get_rank(), time.time()), flush=True)
    torch.cuda._sleep(1 << 62)  # spins on the GPU: the next collective waits behind it
    dist.all_reduce(t)
    torch.cuda.synchronize()
    print("the collective completed: the watchdog did not abort it", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
