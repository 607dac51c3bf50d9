"""What ltd says about jobs, as plain dataclasses (no protobuf in sight).

Each has ``from_proto`` (ltd's typed reply) and ``from_record`` (the JSON of
a job's record, as ``ltrun --report`` writes it); times are timezone-aware
``datetime`` objects, absent ones ``None``. Texts from a job (messages,
stacks) are ``str``, escaped by ltd where they were no UTF-8.
"""

import base64
import dataclasses
import datetime
from typing import List, Optional

__all__ = ["RootCause", "HangReport", "HangReportRank", "RankInfo", "JobInfo", "describe_cause"]


def _ts(ts):
    """A protobuf Timestamp as a datetime, None when unset."""
    if ts is None or (ts.seconds == 0 and ts.nanos == 0):
        return None
    return datetime.datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, datetime.timezone.utc)


def _rfc3339(text):
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _text(value):
    """A record's text: a string, or {"base64": ...} for bytes that are no UTF-8."""
    if isinstance(value, dict) and "base64" in value:
        raw = base64.b64decode(value["base64"])
        return raw.decode("utf-8", "backslashreplace")
    return value if isinstance(value, str) else ""


def _opt(msg, field):
    return getattr(msg, field) if msg.HasField(field) else None


@dataclasses.dataclass(frozen=True)
class RootCause:
    """The first failure of a job; every other rank's end is a consequence.

    ``rank``: the local rank to blame (``None``: none, e.g. a cancel);
    ``reason``: SPEC's word (``exited``, ``signaled``, ``hang``,
    ``startup_timeout``, ``cancelled``, ``daemon_lost``,
    ``supervisor_lost``, ``spawn_failed``, ...); ``message``: the rank's own
    ``error TEXT`` or ltd's account.
    """

    reason: str
    rank: Optional[int] = None
    exit_code: int = 0
    signal: int = 0
    message: str = ""
    node: Optional[int] = None
    at: Optional[datetime.datetime] = None

    @classmethod
    def from_proto(cls, c):
        from ltd._pb import ltd_pb2

        return cls(
            reason=ltd_pb2.RootCause.Reason.Name(c.reason),
            rank=_opt(c, "rank"),
            exit_code=c.exit_code,
            signal=c.signal,
            message=c.message,
            node=_opt(c, "node"),
            at=_ts(c.at),
        )

    @classmethod
    def from_record(cls, j):
        return cls(
            reason=j.get("reason") or "REASON_UNSPECIFIED",
            rank=j.get("rank"),
            exit_code=j.get("exit_code") or 0,
            signal=j.get("signal") or 0,
            message=_text(j.get("message")),
            node=j.get("node"),
            at=_rfc3339(j.get("at")),
        )

    def describe(self):
        """One line, as ltctl says it: ``rank 2 exited with code 3: ...``."""
        return describe_cause(self)


def describe_cause(c):
    who = "rank %s" % ("?" if c.rank is None else c.rank)
    if c.node is not None and c.reason != "remote_failure":
        who = "node %d %s" % (c.node, who)
    what = {
        "exited": "%s exited with code %d" % (who, c.exit_code),
        "signaled": "%s died of signal %d" % (who, c.signal),
        "hang": who + " hung",
        "startup_timeout": who + " hung",
        "spawn_failed": "the program could not start",
        "cancelled": "cancelled",
        "daemon_lost": "lost while ltd was away",
        "dependency_failed": "never ran",
        "time_limit": "time limit",
        "oom": who + " was killed by the OOM killer",
        "supervisor_lost": "lost when its supervisor died",
        "remote_failure": "torn down: node %s of the run failed" % ("?" if c.node is None else c.node),
    }.get(c.reason, c.reason)
    if c.message and what not in c.message:
        what += ": " + c.message
    return what


@dataclasses.dataclass(frozen=True)
class HangReportRank:
    """One rank in a hang report: where it was when the job was found hung."""

    rank: int
    last_step: Optional[int] = None
    last_heartbeat_at: Optional[datetime.datetime] = None
    stalled: bool = False
    straggler: bool = False
    in_collective: bool = False
    process_state: str = ""
    stack: str = ""


@dataclasses.dataclass(frozen=True)
class HangReport:
    """Written before a hung job is torn down: who stalled, and every rank's stack."""

    at: Optional[datetime.datetime]
    stalled_ranks: List[int]
    straggler_ranks: List[int]
    ranks: List[HangReportRank]

    @classmethod
    def from_proto(cls, h):
        return cls(
            at=_ts(h.at),
            stalled_ranks=list(h.stalled_ranks),
            straggler_ranks=list(h.straggler_ranks),
            ranks=[
                HangReportRank(
                    rank=r.rank,
                    last_step=_opt(r, "last_step"),
                    last_heartbeat_at=_ts(r.last_heartbeat_at),
                    stalled=r.stalled,
                    straggler=r.straggler,
                    in_collective=r.in_collective,
                    process_state=r.process_state,
                    stack=r.stack,
                )
                for r in h.ranks
            ],
        )

    @classmethod
    def from_record(cls, j):
        return cls(
            at=_rfc3339(j.get("at")),
            stalled_ranks=list(j.get("stalled_ranks") or []),
            straggler_ranks=list(j.get("straggler_ranks") or []),
            ranks=[
                HangReportRank(
                    rank=r.get("rank", 0),
                    last_step=r.get("last_step"),
                    last_heartbeat_at=_rfc3339(r.get("last_heartbeat_at")),
                    stalled=bool(r.get("stalled")),
                    straggler=bool(r.get("straggler")),
                    in_collective=bool(r.get("in_collective")),
                    process_state=_text(r.get("process_state")),
                    stack=_text(r.get("stack")),
                )
                for r in j.get("ranks") or []
            ],
        )

    def __str__(self):
        lines = ["hang report: stalled rank(s) %s" % ",".join(map(str, self.stalled_ranks))]
        if self.straggler_ranks:
            lines[0] += "; stragglers " + ",".join(map(str, self.straggler_ranks))
        for r in self.ranks:
            if r.stalled and r.stack:
                lines.append("rank %d was here:\n%s" % (r.rank, r.stack.rstrip("\n")))
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class RankInfo:
    """One rank of a job. ``state``: PENDING, RUNNING, EXITED, FAILED, KILLED, LOST."""

    rank: int
    pid: int
    state: str
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    last_step: Optional[int] = None
    last_heartbeat_at: Optional[datetime.datetime] = None
    error: str = ""


@dataclasses.dataclass(frozen=True)
class JobInfo:
    """A job as ``ltctl show --json`` has it (the fields most use; ``proto``: all)."""

    id: str
    name: str
    user: str
    uid: int
    state: str
    exit_code: Optional[int]
    devices: int
    master_port: int
    restart_count: int
    max_restarts: int
    submitted_at: Optional[datetime.datetime]
    started_at: Optional[datetime.datetime]
    ended_at: Optional[datetime.datetime]
    root_cause: Optional[RootCause]
    hang_report: Optional[HangReport]
    ranks: List[RankInfo]
    argv: List[str]
    cwd: Optional[str]
    pending_reason: str
    heartbeat_mode: str
    hang_timeout_ms: int
    time_limit_ms: int = 0  # --time; 0: none
    held_until: Optional[datetime.datetime] = None  # while a hung job is held (--hold-on-hang)
    mem_bytes: int = 0  # --mem; 0: none
    mem_per_rank_bytes: int = 0
    cpu_millis: int = 0  # --cpus in thousandths of a CPU; 0: none
    # Ranks that did not die of SIGKILL: {"rank", "pid", "state", "wchan", "gone"}.
    unkillable: List[dict] = dataclasses.field(default_factory=list)
    # Another user's job: the fields ltd hid from this caller ("cwd",
    # "argv", "root_cause.message", ...); those are empty (cwd: None) and
    # argv holds the program alone. Empty for one's own jobs.
    hidden: List[str] = dataclasses.field(default_factory=list)
    # Its ranks filled errors/ (TORCHELASTIC_ERROR_FILE's dir): writes past it failed.
    errors_full: bool = False
    label: str = ""  # what ps shows as COMMAND instead of argv ("": argv)
    # A task of an array (``submit(array=...)``): the array's id ("": no
    # task), the task's id and the array's count; ``array_tasks`` (show of
    # the whole array): {"task_id", "job_id", "state", "exit_code"} each.
    array_job_id: str = ""
    array_task_id: int = 0
    array_task_count: int = 0
    array_tasks: List[dict] = dataclasses.field(default_factory=list)
    proto: object = dataclasses.field(repr=False, compare=False, default=None)

    @classmethod
    def from_proto(cls, j):
        from ltd._pb import ltd_pb2

        return cls(
            id=j.id,
            name=j.name,
            user=j.user,
            uid=j.uid,
            state=ltd_pb2.Job.State.Name(j.state),
            exit_code=_opt(j, "exit_code"),
            devices=j.devices,
            master_port=j.master_port,
            restart_count=j.restart_count,
            max_restarts=j.max_restarts,
            submitted_at=_ts(j.submitted_at),
            started_at=_ts(j.started_at),
            ended_at=_ts(j.ended_at),
            root_cause=RootCause.from_proto(j.root_cause) if j.HasField("root_cause") else None,
            hang_report=HangReport.from_proto(j.hang_report) if j.HasField("hang_report") else None,
            ranks=[
                RankInfo(
                    rank=r.rank,
                    pid=r.pid,
                    state=ltd_pb2.Rank.State.Name(r.state),
                    exit_code=_opt(r, "exit_code"),
                    signal=_opt(r, "signal"),
                    last_step=_opt(r, "last_step"),
                    last_heartbeat_at=_ts(r.last_heartbeat_at),
                    error=r.error,
                )
                for r in j.ranks
            ],
            argv=list(j.argv),
            label=j.label,
            cwd=None if "cwd" in j.hidden else j.cwd,
            pending_reason=j.pending_reason,
            heartbeat_mode=ltd_pb2.Job.HeartbeatMode.Name(j.heartbeat_mode),
            hang_timeout_ms=j.hang_timeout_ms,
            time_limit_ms=j.time_limit_ms,
            held_until=_ts(j.held_until),
            mem_bytes=j.mem_bytes,
            mem_per_rank_bytes=j.mem_per_rank_bytes,
            cpu_millis=j.cpu_millis,
            unkillable=[
                {"rank": u.rank, "pid": u.pid, "descendant": u.descendant,
                 "state": u.state, "wchan": u.wchan,
                 "gone": u.HasField("gone_at")}
                for u in j.unkillable
            ],
            hidden=list(j.hidden),
            errors_full=j.errors.full,
            array_job_id=j.array_job_id,
            array_task_id=j.array_task_id,
            array_task_count=j.array_task_count,
            array_tasks=[
                {"task_id": t.task_id, "job_id": t.job_id,
                 "state": ltd_pb2.Job.State.Name(t.state),
                 "exit_code": t.exit_code if t.HasField("exit_code") else None}
                for t in j.array_tasks
            ],
            proto=j,
        )

    @property
    def finished(self):
        """Whether the job has ended (SUCCEEDED, FAILED, CANCELLED, LOST, TIMEOUT,
        OUT_OF_MEMORY or NODE_FAIL)."""
        return self.state not in ("PENDING", "STARTING", "RUNNING", "STATE_UNSPECIFIED")
