"""The kit's CUDA rank: allocates GPU memory, computes with it and checks
the result, then exits 0, holds, or crashes while holding.

  --mib N              memory to hold on the rank's GPU (default 1024)
  --hold-until PATH    after computing, hold the memory until PATH exists
                       (at most 5 minutes), then exit 0
  --crash-rank R       rank R dies of SIGSEGV once every rank holds its
                       memory; the others hold theirs until torn down
  --init-only          (not a rank) initialise CUDA and hold --mib until
                       --hold-until's PATH exists: a process outside any job
"""
import argparse
import os
import signal
import sys
import time

import torch


def hold_until(path, limit=300):
    end = time.monotonic() + limit
    while not os.path.exists(path) and time.monotonic() < end:
        time.sleep(0.1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--hold-until", default="")
    p.add_argument("--crash-rank", type=int, default=-1)
    p.add_argument("--ready-dir", default="")
    a = p.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    if not torch.cuda.is_available():
        print("rank %d: torch sees no GPU (CUDA_VISIBLE_DEVICES=%r)"
              % (rank, os.environ.get("CUDA_VISIBLE_DEVICES")), file=sys.stderr, flush=True)
        return 3
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    held = torch.empty(a.mib * (1 << 20), dtype=torch.uint8, device=dev)
    held.fill_(1)
    x = torch.arange(1024 * 1024, dtype=torch.float32, device=dev).reshape(1024, 1024) / 1e6
    y = (x @ torch.ones(1024, 1, device=dev)).sum().item()
    want = float(torch.arange(1024 * 1024, dtype=torch.float64).sum() / 1e6)
    if abs(y - want) > 1e-3 * want or int(held.sum().item()) != held.numel():
        print("rank %d: wrong result %r, want %r" % (rank, y, want), file=sys.stderr, flush=True)
        return 4
    torch.cuda.synchronize()
    print("rank %d cuda ok on %s (CUDA_VISIBLE_DEVICES=%s) holding %d MiB pid %d"
          % (rank, torch.cuda.get_device_name(dev), os.environ.get("CUDA_VISIBLE_DEVICES", ""),
             a.mib, os.getpid()), flush=True)
    if a.crash_rank >= 0:
        if a.ready_dir:
            open(os.path.join(a.ready_dir, "rank%d" % rank), "w").close()
        if rank == a.crash_rank:
            world = int(os.environ.get("WORLD_SIZE", "1"))
            end = time.monotonic() + 120
            while a.ready_dir and len(os.listdir(a.ready_dir)) < world and time.monotonic() < end:
                time.sleep(0.05)
            print("rank %d crash at %.3f" % (rank, time.time()), flush=True)
            os.kill(os.getpid(), signal.SIGSEGV)
        while True:
            time.sleep(1)
    if a.hold_until:
        hold_until(a.hold_until)
    return 0


if __name__ == "__main__":
    sys.exit(main())
