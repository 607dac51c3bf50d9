"""``LtdHeartbeat``: heartbeats from a Lightning Trainer to ltd.

    from ltworker.lightning import LtdHeartbeat
    trainer = Trainer(callbacks=[LtdHeartbeat(timeout=60)])

Works with ``lightning`` (``lightning.pytorch``) or the older
``pytorch_lightning``, whichever is installed; importing this module imports
it, importing ``ltworker`` does not. See ``ltworker.callback.HeartbeatHooks``
for what the callback sends.
"""

from ltworker.callback import DEFAULT_CHECKPOINT_TIMEOUT, HeartbeatHooks

try:
    from lightning.pytorch import Callback as _Callback
except ImportError:
    try:
        from pytorch_lightning import Callback as _Callback
    except ImportError:
        raise ImportError(
            "ltworker.lightning needs Lightning: pip install lightning "
            "(or pytorch-lightning); plain PyTorch scripts use ltworker.heartbeat()"
        ) from None

__all__ = ["LtdHeartbeat"]


class LtdHeartbeat(HeartbeatHooks, _Callback):
    """A Lightning Callback that sends heartbeats to ltd; a no-op outside ltd.

    ``timeout``: the rank's heartbeat timeout in seconds, sent when ``fit``
    starts (so it arms the watchdog even in a job submitted without
    ``--heartbeat-timeout``) and restored after each checkpoint save
    (default: LT_HEARTBEAT_TIMEOUT). ``checkpoint_timeout``: the timeout in
    seconds while a checkpoint is written.
    """

    def __init__(self, timeout=None, checkpoint_timeout=DEFAULT_CHECKPOINT_TIMEOUT):
        _Callback.__init__(self)
        HeartbeatHooks.__init__(self, timeout=timeout, checkpoint_timeout=checkpoint_timeout)
