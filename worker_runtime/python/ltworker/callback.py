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

    - ``fit`` starting (``on_fit_start``, before the sanity check; else
      ``on_train_start``) sends ``timeout <timeout>``: that arms the rank's
      watchdog even in a job submitted without ``--heartbeat-timeout``.
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

    ``timeout`` is the rank's heartbeat timeout in seconds; by default it is
    read from LT_HEARTBEAT_TIMEOUT ("30s", "5m", ...), which ltd sets from
    ``ltctl submit --heartbeat-timeout``. Both timeouts follow
    ``ltworker.set_timeout``: 0 turns the watchdog off, a positive value
    rounds up to whole milliseconds, a negative one raises ValueError here.
    If no timeout is known nothing is armed, and the timeout cannot be
    restored and stays at ``checkpoint_timeout`` after the first save (a
    warning says so): hangs are then caught later, but a slow save never
    kills the job.
    """

    def __init__(self, timeout=None, checkpoint_timeout=DEFAULT_CHECKPOINT_TIMEOUT):
        if timeout is None:
            timeout = _timeout_from_environment()
        # The same rule and errors as set_timeout, raised now rather than in
        # the middle of training.
        if timeout is not None:
            ltworker._timeout_ms(timeout)
        ltworker._timeout_ms(checkpoint_timeout)
        self.timeout = timeout
        self.checkpoint_timeout = checkpoint_timeout
        self._armed = False
        self._widened = False
        self._warned = False

    # -- helpers --------------------------------------------------------------

    def _arm(self):
        # "timeout DUR" arms the watchdog in ltd even before the first beat
        # and without --heartbeat-timeout; the beat after it is the first one.
        if self.timeout is not None:
            ltworker.set_timeout(self.timeout)
        self._armed = True
        self._widened = False

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
        # Lightning 1.9 and 2.x call this first in fit, before the sanity
        # check (which can hang on a dead peer too).
        self._arm()
        self._beat()

    def on_train_start(self, trainer, pl_module):
        if not self._armed:
            self._arm()  # a loop that skipped on_fit_start
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
