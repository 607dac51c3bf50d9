"""ltd's Python client: the daemon's verbs as typed calls, and ``ltd.launch``.

    import ltd
    job = ltd.Client().submit(["python3", "train.py"], devices=4, heartbeat_timeout="60s")
    print(job.wait(), job.root_cause)

    def train(lr):
        ...                       # runs on every rank, torchrun's environment set
        return loss
    loss = ltd.launch(train, 3e-4, devices=2)   # rank 0's value; ltd.JobFailed if a rank fails

``Client`` and ``launch`` load gRPC on first use, so that a rank (which
imports this package to start) pays nothing for them.
"""

from ltd.errors import (  # noqa: F401
    Error,
    FailedPrecondition,
    InvalidArgument,
    JobFailed,
    LimitReached,
    NotFound,
    PermissionDenied,
    Unreachable,
)
from ltd.types import HangReport, HangReportRank, JobInfo, RankInfo, RootCause  # noqa: F401

__all__ = [
    "Client",
    "Job",
    "launch",
    "Error",
    "Unreachable",
    "NotFound",
    "PermissionDenied",
    "InvalidArgument",
    "FailedPrecondition",
    "LimitReached",
    "JobFailed",
    "RootCause",
    "HangReport",
    "HangReportRank",
    "JobInfo",
    "RankInfo",
    "Output",
    "Notice",
    "Ended",
    "DEFAULT_SOCKET",
]

_LAZY = {
    "Client": "ltd.client",
    "Job": "ltd.job",
    "Output": "ltd.job",
    "Notice": "ltd.job",
    "Ended": "ltd.job",
    "DEFAULT_SOCKET": "ltd.client",
    "launch": "ltd.launcher",
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError("module 'ltd' has no attribute %r" % name)
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
