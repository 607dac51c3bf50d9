"""What the Lightning callback does, without Lightning.

``HeartbeatHooks`` has Lightning's hook names and signatures but depends on
nothing, so its logic is tested with a fake trainer; ``ltworker.lightning``
mixes it into a real ``Callback``.
"""

import os
import warnings

import ltworker

__all__ = ["HeartbeatHooks", "DEFAULT_CHECKPOINT_TIMEOUT"]

# Long enough for a multi-GB checkpoint on a slow shared filesystem.
DEFAULT_CHECKPOINT_TIMEOUT = 600.0


def _timeout_from_environment():
    value = os.environ.get("LT_HEARTBEAT_TIMEOUT")
    if not value:
        return None
    try:
        return ltworker.parse_duration(value)
    except ValueError:
        warnings.warn(f"ltworker: ignoring LT_HEARTBEAT_TIMEOUT={value!r}", stacklevel=3)
        return None


class HeartbeatHooks:
    """Heartbeats from Lightning's training loop.

    - Every training batch end sends ``hb <trainer.global_step>``; validation,
      test and predict batches and the loop's start/end points send ``hb``
      (alive, without claiming progress).
    - A checkpoint save widens the heartbeat timeout to
      ``checkpoint_timeout`` seconds: Lightning calls ``on_save_checkpoint``
      just before writing the file, and no hook runs while it is written. The
      job's own timeout is restored at the next hook (the next batch, say),
      by sending ``timeout <timeout>``.
    - An exception that ends ``fit`` is reported with ``report_error`` so it
      becomes the job's root-cause message.

    ``timeout`` is the job's normal heartbeat timeout in seconds (what
    ``ltctl submit --heartbeat-timeout`` said); by default it is read from
    LT_HEARTBEAT_TIMEOUT ("30s", "5m", ...). If neither is known the timeout
    cannot be restored and stays at ``checkpoint_timeout`` after the first
    save (a warning says so): hangs are then caught later, but a slow save
    never kills the job.
    """

    def __init__(self, timeout=None, checkpoint_timeout=DEFAULT_CHECKPOINT_TIMEOUT):
        if timeout is None:
            timeout = _timeout_from_environment()
        if timeout is not None and timeout < 0:
            raise ValueError(f"timeout must be >= 0, got {timeout}")
        if checkpoint_timeout < 0:
            raise ValueError(f"checkpoint_timeout must be >= 0, got {checkpoint_timeout}")
        self.timeout = timeout
        self.checkpoint_timeout = checkpoint_timeout
        self._widened = False
        self._warned = False

    # -- helpers --------------------------------------------------------------

    def _restore_timeout(self):
        if self._widened and self.timeout is not None:
            ltworker.set_timeout(self.timeout)
            self._widened = False

    def _beat(self, step=None):
        self._restore_timeout()
        ltworker.heartbeat(step)

    @staticmethod
    def _global_step(trainer):
        step = getattr(trainer, "global_step", None)
        try:
            return step if step is not None and step >= 0 else None
        except TypeError:
            return None

    # -- Lightning hooks --------------------------------------------------------

    def on_fit_start(self, trainer, pl_module):
        self._beat()

    def on_train_start(self, trainer, pl_module):
        self._beat()

    def on_train_epoch_start(self, trainer, pl_module):
        self._beat()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        # No beat (the batch end sends one); only undo a checkpoint's
        # widening before a possibly long batch.
        self._restore_timeout()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._beat(self._global_step(trainer))

    def on_train_epoch_end(self, trainer, pl_module):
        self._beat()

    def on_validation_start(self, trainer, pl_module):
        self._beat()

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx,
                                dataloader_idx=0):
        self._beat()

    def on_validation_end(self, trainer, pl_module):
        self._beat()

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._beat()

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx,
                             dataloader_idx=0):
        self._beat()

    def on_train_end(self, trainer, pl_module):
        self._beat()

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        if self.timeout is None and not self._warned:
            self._warned = True
            warnings.warn(
                "ltworker: the job's heartbeat timeout is unknown (pass timeout= or set "
                "LT_HEARTBEAT_TIMEOUT), so after this checkpoint it stays at "
                f"{self.checkpoint_timeout:g}s",
                stacklevel=2,
            )
        ltworker.set_timeout(self.checkpoint_timeout)
        ltworker.heartbeat()
        self._widened = True

    def on_exception(self, trainer, pl_module, exception):
        name = type(exception).__name__
        message = str(exception)
        ltworker.report_error(f"{name}: {message}" if message else name)
