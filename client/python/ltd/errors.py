"""The errors of the ltd client: each carries ltd's (or the client's) one line."""

__all__ = [
    "Error",
    "Unreachable",
    "NotFound",
    "PermissionDenied",
    "InvalidArgument",
    "FailedPrecondition",
    "LimitReached",
    "JobFailed",
]


class Error(Exception):
    """An error of ltd or of this client; ``str()`` is one line saying what to do.

    ``code``: the gRPC status code's name (``"NOT_FOUND"``, ...) when ltd
    answered, else ``None``.
    """

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        self.code = code


class Unreachable(Error):
    """ltd is not running (or not at that socket), or went away for too long."""


class NotFound(Error):
    """No job of that id or name."""


class PermissionDenied(Error):
    """The job is another user's (only its owner or root may do that)."""


class InvalidArgument(Error):
    """A bad request: a bad option, an ambiguous name, a rank out of range."""


class FailedPrecondition(Error):
    """The job is not in a state for that (it ended already, has not started)."""


class LimitReached(Error):
    """A per-user limit of ltd (jobs, connections) was reached."""


class JobFailed(Error):
    """A job (or a launched function) did not succeed.

    ``str()`` is the root cause, e.g. ``rank 1: ValueError: bad batch (cell
    4, line 3)``. Attributes: ``job_id``, ``state`` ("FAILED", "CANCELLED",
    "LOST", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL"), ``exit_code`` (the job's, as ltctl exits: the rank's code,
    128+N for signal N, 124 for a hang, 130 for a cancel), ``rank``
    (``None`` when no rank is to blame), ``reason`` ("exited", "signaled",
    "hang", ...), ``signal``, ``root_cause`` (a :class:`ltd.RootCause` or
    ``None``) and ``hang_report`` (a :class:`ltd.HangReport` or ``None``).
    """

    def __init__(self, message, job_id, state, exit_code, root_cause=None, hang_report=None):
        super().__init__(message)
        self.job_id = job_id
        self.state = state
        self.exit_code = exit_code
        self.root_cause = root_cause
        self.hang_report = hang_report
        self.rank = root_cause.rank if root_cause else None
        self.reason = root_cause.reason if root_cause else None
        self.signal = root_cause.signal if root_cause else None
