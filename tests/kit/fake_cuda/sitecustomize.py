"""A CUDA that is not there, for the GPU check kit's test (tests/kit).

On PYTHONPATH (before anything else), this makes the first `import torch`
patch a CPU-only torch so that the kit's GPU checks run their whole course
on a host without a GPU: torch.cuda says it has the GPUs
CUDA_VISIBLE_DEVICES names, tensors asked for on "cuda" are made on the
CPU, and what a process allocates there is written to the tests' fake NVML
file ($KIT_FAKE_NVML_FILE, with its `live` line) as a `proc GPU PID MIB`
line, so that ltd sees the process and its memory on that GPU until the
process is gone, as NVML would. Large allocations are accounted in full
but made small: the checks hold GiBs "on the GPU".

It does not pretend to have NCCL: torch.distributed.is_nccl_available()
stays False, and the NCCL checks say why they skip.
"""
import fcntl
import importlib.abc
import importlib.machinery
import os
import sys

_NVML_FILE = os.environ.get("KIT_FAKE_NVML_FILE", "")
_LARGE = 64 << 20  # an empty() past this is accounted in full but made small
_SMALL = 1 << 20
_held = {}  # GPU index -> bytes this process holds there


def _account(gpu, nbytes):
    if not _NVML_FILE:
        return
    _held[gpu] = _held.get(gpu, 0) + nbytes
    with open(_NVML_FILE + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(_NVML_FILE) as f:
            lines = [ln for ln in f if not (ln.startswith("proc ") and ln.split()[2] == str(os.getpid()))]
        for g, b in sorted(_held.items()):
            lines.append("proc %d %d %d\n" % (g, os.getpid(), max(1, b >> 20)))
        tmp = "%s.%d" % (_NVML_FILE, os.getpid())
        with open(tmp, "w") as f:
            f.writelines(lines)
        os.rename(tmp, _NVML_FILE)


def _visible():
    v = os.environ.get("CUDA_VISIBLE_DEVICES")
    if v is None:
        count = 0
        if _NVML_FILE:
            with open(_NVML_FILE) as f:
                for ln in f:
                    if ln.startswith("count "):
                        count = int(ln.split()[1])
        return list(range(count))
    return [int(x) for x in v.split(",") if x.strip().isdigit()]


def _patch(torch):
    def is_cuda(device):
        if device is None:
            return False
        return torch.device(device).type == "cuda"

    def gpu_of(device):
        d = torch.device(device)
        return _visible()[d.index or 0]

    def factory(name, real):
        def make(*args, **kwargs):
            device = kwargs.get("device")
            if not is_cuda(device):
                return real(*args, **kwargs)
            kwargs["device"] = "cpu"
            t = real(*args, **kwargs)
            nbytes = t.numel() * t.element_size()
            if name == "empty" and nbytes > _LARGE:  # untouched yet: no memory taken
                t = real(_SMALL // t.element_size(), dtype=t.dtype)
            _account(gpu_of(device), nbytes)
            return t

        return make

    for name in ("empty", "ones", "zeros", "full", "arange"):
        setattr(torch, name, factory(name, getattr(torch, name)))
    torch.cuda.is_available = lambda: bool(_visible())
    torch.cuda.device_count = lambda: len(_visible())
    torch.cuda.get_device_name = lambda device=None: "fake GPU (tests/kit/fake_cuda)"
    torch.cuda.synchronize = lambda device=None: None
    torch.cuda.set_device = lambda device: None
    torch.version.cuda = "fake"


class _PatchTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module):
            real_exec(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _PatchTorch())
