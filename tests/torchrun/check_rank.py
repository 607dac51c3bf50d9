"""A rank of the torchrun corpus (corpus_test.py): writes what it was given
(its environment, argv, how Python was started) to $LT_CHECK_DIR/rank-R.json,
says a line on stdout and one on stderr, then does what LT_CHECK_DO says:
nothing, crash (RANK $LT_CHECK_CRASH_RANK, else 1, exits 3 once every rank
has written its record; the others wait 60 s), crash once (the same, on rank
1 of the first attempt), or wait until $LT_CHECK_DIR/stop exists (at most 60
s)."""

import json
import os
import sys
import time

check = os.environ["LT_CHECK_DIR"]
rank = os.environ.get("RANK", "x")
attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "x")
record = {
    "env": {k: v for k, v in os.environ.items()
            if k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                     "NODE_RANK", "ROLE_RANK", "ROLE_WORLD_SIZE", "GROUP_WORLD_SIZE",
                     "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS")
            or k.startswith("TORCHELASTIC_")},
    "argv": sys.argv[1:],
    "pid": os.getpid(),
    "ns": os.environ.get("LT_CHECK_NS", ""),
    "orig_argv": getattr(sys, "orig_argv", []),
    "unbuffered": bool(getattr(sys.stdout, "write_through", False)),
    "module": __name__ == "__main__" and __spec__ is not None and __spec__.name or "",
}
with open(os.path.join(check, f".rank-{rank}-{attempt}.json"), "w") as f:
    json.dump(record, f)
os.rename(os.path.join(check, f".rank-{rank}-{attempt}.json"),
          os.path.join(check, f"rank-{rank}-{attempt}.json"))
print(f"out of rank {rank}", flush=True)
print(f"err of rank {rank}", file=sys.stderr, flush=True)
do = os.environ.get("LT_CHECK_DO", "")


def exit_once_every_rank_wrote():
    """Exits 3, not before every rank of this attempt has written its
    record: the crash tears the job down at once, and a rank still starting
    would never write the record the case checks (30 s at most)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sum(
            1 for n in os.listdir(check)
            if n.startswith("rank-") and n.endswith(f"-{attempt}.json")) < world:
        time.sleep(0.02)
    sys.exit(3)


if do == "crash-once" and rank == "1" and attempt == "0":
    exit_once_every_rank_wrote()
if do == "crash":
    if rank == os.environ.get("LT_CHECK_CRASH_RANK", "1"):
        exit_once_every_rank_wrote()
    time.sleep(60)
if do == "wait":
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(check, "stop")) and time.monotonic() < deadline:
        time.sleep(0.05)
