"""A stand-in for Lightning 1.9's choice of launcher, for tests (Lightning is not installed).

Lightning 1.9.5's ``Trainer(devices=N, strategy="ddp")`` picks a cluster
environment (``TorchElasticEnvironment`` when RANK, GROUP_RANK, LOCAL_RANK
and LOCAL_WORLD_SIZE are all set: torchrun's, and ltd's), and only when
that environment does not create processes externally does DDP get a
``_SubprocessScriptLaunch``, which re-runs the script for ranks 1..N-1. In
an interactive Python that launcher is refused outright. This stand-in
makes the same decisions and fails loudly where Lightning would start ranks
of its own; ``fit`` then runs ``model(trainer)`` on this rank.
"""

import os
import sys

_TORCHELASTIC_VARS = {"RANK", "GROUP_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}


class MisconfigurationException(Exception):
    pass


def _is_interactive():
    return hasattr(sys, "ps1") or bool(sys.flags.interactive)


class Trainer:
    def __init__(self, devices=1, strategy="ddp", accelerator="cpu", num_nodes=1):
        self.devices = devices
        self.num_nodes = num_nodes
        if _TORCHELASTIC_VARS.issubset(os.environ):
            self.cluster_environment = "TorchElasticEnvironment"
            self.launcher = None  # processes are created externally
            self.world_size = int(os.environ["WORLD_SIZE"])
            self.global_rank = int(os.environ["RANK"])
            self.local_rank = int(os.environ["LOCAL_RANK"])
            if devices * num_nodes != self.world_size:
                raise ValueError(
                    "You set `devices=%d` and `num_nodes=%d` in Lightning, but the product (%d) does not "
                    "match the world size (%d)." % (devices, num_nodes, devices * num_nodes, self.world_size))
        else:
            self.cluster_environment = "LightningEnvironment"
            self.launcher = "_SubprocessScriptLaunch" if strategy == "ddp" and devices > 1 else None
            self.world_size, self.global_rank, self.local_rank = devices * num_nodes, 0, 0
        if _is_interactive() and self.launcher is not None:
            raise MisconfigurationException(
                "`Trainer(strategy=%r)` is not compatible with an interactive environment." % strategy)

    def fit(self, model):
        if self.launcher is not None:
            raise RuntimeError("stand-in Lightning: would start %d rank(s) of its own (%s)"
                               % (self.world_size - 1, self.launcher))
        return model(self)
