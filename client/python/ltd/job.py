"""``ltd.Job``: one job of ltd, and the events of its stream (``Output``, ``Notice``, ``Ended``).

A ``Job`` holds its ``Client`` and asks it for every RPC; it follows its job
through restarts of ltd as ``ltctl attach``, ``wait`` and ``logs -f`` do.
"""

import dataclasses
import datetime
import sys
import time
from typing import Iterator, Optional

import grpc
from google.protobuf import timestamp_pb2

from ltd import errors
from ltd._durations import to_ms
from ltd._pb import ltd_pb2
from ltd.types import JobInfo, RootCause

__all__ = ["Job", "Output", "Notice", "Ended"]

# A stream that ends with one of these lost ltd (it stopped or restarted).
GONE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)


@dataclasses.dataclass(frozen=True)
class Output:
    """One output line of a rank, without its newline, as the rank wrote it."""

    rank: int
    data: bytes
    stderr: bool = False

    @property
    def text(self):
        return self.data.decode("utf-8", "backslashreplace")


@dataclasses.dataclass(frozen=True)
class Notice:
    """ltd's word about the stream, e.g. lines dropped for a slow reader."""

    text: str


@dataclasses.dataclass(frozen=True)
class Ended:
    """The job's end: its state, exit code (as ltctl exits) and root cause."""

    job_id: str
    state: str
    exit_code: int
    root_cause: Optional[RootCause]


def _say(line):
    print(line, file=sys.stderr, flush=True)


def _event(ev):
    kind = ev.WhichOneof("event")
    if kind == "output":
        return Output(ev.output.rank, ev.output.data, ev.output.stderr)
    if kind == "notice":
        return Notice(ev.notice)
    if kind == "ended":
        e = ev.ended
        return Ended(
            e.job_id,
            ltd_pb2.Job.State.Name(e.state),
            e.exit_code,
            RootCause.from_proto(e.root_cause) if e.HasField("root_cause") else None,
        )
    return None


class Job:
    """A job of ltd, known by its id.

    ``info`` (and ``state``, ``exit_code``, ``root_cause``,
    ``hang_report``) is ltd's record as of the last :meth:`refresh`; they
    fetch it on first use, and after the job's end has been seen.
    """

    def __init__(self, client, job_id, info=None, stream=None, cancel_on_disconnect=False,
                 array=False, at=None):
        self.client = client
        self.id = job_id
        self._info = info
        self._stream = stream
        # Where in the job's log the held stream starts, when ltd said so.
        self._at = at
        self._cancel = cancel_on_disconnect
        # A whole array (submit(array=...)): wait() waits for every task.
        self._array = array

    def __repr__(self):
        return "<ltd.Job %s %s>" % (self.id, self._info.state if self._info else "?")

    def refresh(self):
        """Reads the job's record from ltd again; returns self."""
        self._info = self.client.show(self.id)
        return self

    @property
    def info(self) -> JobInfo:
        if self._info is None:
            self.refresh()
        return self._info

    @property
    def state(self):
        """PENDING, STARTING (a node waiting in its run's rendezvous, holding its devices),
        RUNNING, then SUCCEEDED, FAILED, CANCELLED, LOST, TIMEOUT, OUT_OF_MEMORY or
        NODE_FAIL (as of the last refresh)."""
        return self.info.state

    @property
    def exit_code(self):
        return self.info.exit_code

    @property
    def root_cause(self):
        return self.info.root_cause

    @property
    def hang_report(self):
        return self.info.hang_report

    def events(self, output=True, say=None) -> Iterator[object]:
        """The job's :class:`Output` lines and :class:`Notice` s, then its :class:`Ended`.

        An attached submit's stream goes on from the job's first line; else
        this attaches (``output=False``: only waits for the end). Follows the
        job through restarts of ltd, as ``ltctl attach`` does, and says so
        through ``say`` (one line; default: to sys.stderr).
        """
        say = say or _say
        # A submit's stream (held since the submit) is read on, never
        # dropped: with cancel_on_disconnect, dropping it cancels the job.
        # Such a job is followed by Attach after a restart too, for the same.
        stream, self._stream = self._stream, None
        attach = output or self._cancel
        again = False
        # Where in the job's log the last event ends: an attach opened again
        # goes on from there, so no line is missed or given twice.
        at = None
        if stream is not None:
            at = self._at if self._at is not None else ltd_pb2.LogPosition()
        while True:
            seen = False
            if stream is None:
                # After a restart, _wait_for_ltd's answer decides: a second
                # look could meet an ltd gone again and say none ever ran
                # (the stream's own failure then waits again).
                if not again:
                    self.client._check_reachable()
                ref = ltd_pb2.JobRef(job=self.id.encode(), cancel_on_disconnect=self._cancel, batched=True)
                if attach and at is not None:
                    getattr(ref, "from").CopyFrom(at)  # `from` is a keyword
                api = self.client._api()
                stream = api.Attach(ref) if attach else api.Wait(ref)
            try:
                for ev in stream:
                    if ev.HasField("at"):
                        log_id = ev.at.log_id or (at.log_id if at is not None else 0)
                        at = ltd_pb2.LogPosition(offset=ev.at.offset, log_id=log_id)
                    if ev.WhichOneof("event") == "lines":
                        if again and not seen:
                            say("ltd: ltd is back; following job %s again" % self.id)
                        seen = True
                        if output:
                            for o in ev.lines.lines:
                                yield Output(o.rank, o.data, o.stderr)
                        continue
                    event = _event(ev)
                    if again and not seen:
                        say("ltd: ltd is back; following job %s again" % self.id)
                    seen = True
                    if event is None or (not output and not isinstance(event, Ended)):
                        continue
                    if isinstance(event, Ended):
                        self._info = None  # what show says now is the end
                    yield event
                    if isinstance(event, Ended):
                        return
                return
            except grpc.RpcError as e:
                if again and e.code() == grpc.StatusCode.NOT_FOUND:
                    raise errors.NotFound(
                        "job %s is gone from ltd (pruned while ltd was away); its output past "
                        "the last line given cannot be shown" % self.id
                    ) from None
                if e.code() not in GONE:
                    raise self.client._error(e) from None
                self.client._wait_for_ltd(e, "attach " + self.id, say if not again or seen else None)
                stream, again = None, True
            finally:
                if stream is not None:
                    stream.cancel()

    def attach(self, stdout=None, stderr=None, prefix=True) -> int:
        """Prints the job's output as ltctl does (``[RANK] line``) until it ends; its exit code."""
        stdout = stdout or sys.stdout
        stderr = stderr or sys.stderr
        code = 0
        for event in self.events(output=True, say=lambda line: (stderr.write(line + "\n"), stderr.flush())):
            if isinstance(event, Output):
                out = stderr if event.stderr else stdout
                out.write(("[%d] " % event.rank if prefix else "") + event.text + "\n")
            elif isinstance(event, Notice):
                stderr.write(event.text + "\n")
            elif isinstance(event, Ended):
                code = event.exit_code
        stdout.flush()
        return code

    def wait(self, say=None) -> int:
        """Blocks until the job ends; its exit code as ``ltctl wait`` exits.

        0: every rank exited 0; else the root cause's code, 128+N for signal
        N, 124 for a hang, 130 for a cancel. Follows through restarts of ltd.
        """
        if self._array:
            # As ``ltctl wait`` of an array: every task, the highest exit code.
            worst = 0
            for t in self.client.show(self.id).array_tasks:
                code = t["exit_code"]
                if code is None or t["state"] in ("PENDING", "STARTING", "RUNNING"):
                    # As ARRAY_TASK: the first task's job id names the whole array.
                    ref = "%s_%d" % (self.id, t["task_id"])
                    code = Job(self.client, ref).wait(say=say)
                worst = max(worst, code)
            return worst
        code = 0
        for event in self.events(output=False, say=say):
            if isinstance(event, Ended):
                code = event.exit_code
        return code

    def kill(self, signal=None):
        """Tears the job down; with ``signal`` (a name or number) only sends it to every rank."""
        self.client.kill(self.id, signal)
        self._info = None

    def stacks(self, rank=None):
        """Where each rank is now, without stopping the job (``ltctl stack``): see
        :meth:`Client.stacks`."""
        return self.client.stacks(self.id, rank)

    def logs(
        self, rank=None, follow=False, tail=None, raw=False, timestamps=False, since=None
    ) -> Iterator[object]:
        """The job's output lines: every rank's as ``[RANK] line``, or one rank's as written.

        ``tail``: only the last N lines; ``follow``: go on until the job ends
        (through restarts of ltd). Lines are ``str`` (bytes that are no UTF-8
        as ``\\xNN``), or ``bytes`` with ``raw``. ``timestamps``: each line
        after the time it reached ltd (``2026-12-01T17:02:03.123456Z``);
        ``since``: only lines since then (a ``datetime``) or since that long
        ago (seconds, a ``timedelta`` or ``"10m"``), as ``ltctl logs``.
        """
        if tail is not None and (not isinstance(tail, int) or tail < 0):
            raise errors.InvalidArgument("tail must be an integer >= 0 (0: everything)")
        since_ts = None
        if since is not None:
            if isinstance(since, datetime.datetime):
                if since.tzinfo is None:
                    raise errors.InvalidArgument("since needs a time zone, e.g. datetime.timezone.utc")
                at = since.timestamp()
            else:
                try:
                    at = time.time() - to_ms(since, "since") / 1000.0
                except ValueError as e:
                    raise errors.InvalidArgument(str(e)) from None
            since_ts = timestamp_pb2.Timestamp()
            since_ts.FromMicroseconds(max(0, int(at * 1e6)))
        r = -1 if rank is None else rank
        show = (lambda b: b) if raw else (lambda b: b.decode("utf-8", "backslashreplace"))
        # Where in the job's log the last chunk given ends: a stream opened
        # again (after ltd restarted) goes on from there, so no line is
        # missed or given twice; the first starts with the tail asked for.
        at = None
        pending = b""  # a line not complete yet, across reconnects too
        again = False
        while True:
            if not again:  # after a restart, _wait_for_ltd's answer decides (as in events)
                self.client._check_reachable()
            req = ltd_pb2.LogsRequest(job=self.id.encode(), rank=r, follow=follow, timestamps=timestamps)
            if at is not None:
                getattr(req, "from").CopyFrom(at)  # `from` is a keyword
            else:
                req.tail = tail or 0
            if since_ts is not None:
                req.since.CopyFrom(since_ts)
            stream = self.client._api().Logs(req)
            try:
                for ev in stream:
                    if ev.HasField("at"):
                        log_id = ev.at.log_id or (at.log_id if at is not None else 0)
                        at = ltd_pb2.LogPosition(offset=ev.at.offset, log_id=log_id)
                    if ev.WhichOneof("event") == "log":
                        pending += ev.log
                        *lines, pending = pending.split(b"\n")
                        for line in lines:
                            yield show(line)
                if pending:
                    yield show(pending)
                return
            except grpc.RpcError as e:
                if not follow or e.code() not in GONE:
                    raise self.client._error(e) from None
                self.client._wait_for_ltd(e, "logs -f " + self.id, None if again else _say)
                again = True
            finally:
                stream.cancel()
