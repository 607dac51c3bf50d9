"""ltd.launch from a process that may have initialised CUDA already (as a
notebook has): the ranks are new interpreters started by ltd or ltrun, not
forks of this one, so CUDA works in them.

  launch_check.py VIA DEVICES [cuda]
"""
import os
import sys


def rank_fn(scale, cuda):
    import os as _os

    value = float(_os.environ["RANK"]) * scale
    if cuda:
        import torch

        value += float(torch.ones(4, device="cuda").sum().item())
    return value


def main():
    via, devices = sys.argv[1], int(sys.argv[2])
    cuda = len(sys.argv) > 3 and sys.argv[3] == "cuda"
    if cuda:
        import torch

        torch.ones(1, device="cuda").sum().item()  # CUDA initialised in this process
        print("caller initialised CUDA on %s" % torch.cuda.get_device_name(0), flush=True)
    import ltd

    values = ltd.launch(rank_fn, 10.0, cuda, devices=devices, via=via, return_all=True,
                        name="kit-launch-%s-%d" % (via, os.getpid()))
    want = [r * 10.0 + (4.0 if cuda else 0.0) for r in range(devices)]
    if values != want:
        print("ltd.launch returned %r, want %r" % (values, want), flush=True)
        return 1
    print("ltd.launch via %s returned %r" % (via, values), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
