"""``ltd.Client``: ltctl's verbs as Python calls over ltd's gRPC API.

Each call is one RPC to ltd over its Unix socket (``proto/ltd.proto``). It
behaves as ltctl does: ``LTD_SOCKET`` then ``/run/ltd/ltd.sock``; a job is
named by id or name, resolved once and then followed by id; a stream that
breaks because ltd restarts (``attach``, ``wait``, ``logs(follow=True)``)
is opened again once ltd is back; exit codes are ltctl's.
"""

import errno as _errno
import os
import socket as _socket
import struct as _struct
import sys
import time
from typing import List

import grpc

from ltd import errors
from ltd._durations import to_ms
from ltd._pb import ltd_pb2, ltd_pb2_grpc
from ltd._values import _bytes, _env_list, _job_ref, _size, _umask, parse_signal
from ltd.job import Job
from ltd.types import JobInfo

__all__ = ["Client", "DEFAULT_SOCKET"]

DEFAULT_SOCKET = "/run/ltd/ltd.sock"
# sockaddr_un's sun_path, less its NUL.
_MAX_SOCKET_PATH = 107
_RPC_TIMEOUT = 30.0

_CODES = {
    grpc.StatusCode.NOT_FOUND: errors.NotFound,
    grpc.StatusCode.PERMISSION_DENIED: errors.PermissionDenied,
    grpc.StatusCode.INVALID_ARGUMENT: errors.InvalidArgument,
    grpc.StatusCode.FAILED_PRECONDITION: errors.FailedPrecondition,
    grpc.StatusCode.RESOURCE_EXHAUSTED: errors.LimitReached,
    grpc.StatusCode.UNAVAILABLE: errors.Unreachable,
}


# rpc/ltd_status.h: ltd marks every error it answers with (the status's
# details), so that its own line is shown and gRPC's wording ("Socket
# closed", "Cancelling all calls") never is.
_LTD_STATUS_MARK = b"ltd.v1"
# Codes that only ltd's own checks give.
_LTD_ONLY_CODES = (
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.OUT_OF_RANGE,
)
# The connection broke: ltd went away, or is on its way out.
_TRANSPORT_CODES = (
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.INTERNAL,
)
_GRPC_OWN = {
    grpc.StatusCode.DEADLINE_EXCEEDED:
        "ltd did not answer in time (it is busy or stuck); try again in a moment",
    grpc.StatusCode.UNIMPLEMENTED:
        "this ltd does not know the request (it is older than this client); use the client "
        "that came with it, or upgrade ltd",
    grpc.StatusCode.RESOURCE_EXHAUSTED:
        "ltd's answer is larger than this client takes; ask for less (ps(state=...), "
        "logs(tail=...))",
}



def _going_away(e):
    """Whether an RPC failed because ltd is on its way out (not a refusal of ltd's)."""
    code = e.code()
    if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
        return False
    return (code != grpc.StatusCode.UNAVAILABLE or not _ltds_own(e)
            or (e.details() or "").startswith("ltd is shutting down"))


def _ltds_own(e):
    """Whether ltd said this error itself (its mark), rather than gRPC."""
    try:
        metadata = e.trailing_metadata() or ()
    except Exception:  # an error raised before any call was made
        return False
    return any(k == "grpc-status-details-bin" and v == _LTD_STATUS_MARK for k, v in metadata)


def _try_connect(path):
    """0 when ltd's socket at ``path`` takes a connection; else the errno."""
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        # A blocking connect waits its turn in the kernel while ltd's listen
        # queue is full (another user's connect flood), where a non-blocking
        # one (settimeout's) fails at once; SO_SNDTIMEO bounds the wait.
        s.setsockopt(_socket.SOL_SOCKET, _socket.SO_SNDTIMEO, _struct.pack("ll", 10, 0))
        s.connect(path)
        return 0
    except OSError as e:
        return e.errno or _errno.ECONNREFUSED
    finally:
        s.close()


class Client:
    """A connection to ltd.

    ``socket``: ltd's socket; default ``$LTD_SOCKET``, else
    ``/run/ltd/ltd.sock``. ``reconnect_for``: how long a stream that lost
    ltd waits for it to come back (ltctl's 10 minutes).
    """

    def __init__(self, socket=None, *, reconnect_for=600.0):
        path = socket if socket else os.environ.get("LTD_SOCKET") or DEFAULT_SOCKET
        path = os.fspath(path)
        if len(os.fsencode(path)) > _MAX_SOCKET_PATH:
            raise errors.InvalidArgument(
                "socket path %s is longer than the %d bytes Unix sockets allow; use a shorter one"
                % (path, _MAX_SOCKET_PATH)
            )
        self.socket = path
        self.reconnect_for = reconnect_for
        self._channel = None
        self._stub = None
        # Whether ltd answered a submit on this channel: later submits skip
        # the checks of its socket that a first one makes.
        self._answered = False

    # -- plumbing ----------------------------------------------------------------

    def _api(self):
        if self._stub is None:
            # A fresh channel after ltd restarted: an old one may sit in
            # gRPC's reconnect backoff for seconds.
            self._channel = grpc.insecure_channel(
                "unix:" + self.socket,
                options=[
                    ("grpc.max_receive_message_length", 64 << 20),
                    ("grpc.enable_retries", 0),
                    # A connect refused by a full listen queue is tried
                    # again soon (calls wait for it: wait_for_ready).
                    ("grpc.initial_reconnect_backoff_ms", 20),
                    ("grpc.min_reconnect_backoff_ms", 20),
                    ("grpc.max_reconnect_backoff_ms", 500),
                ],
            )
            self._stub = ltd_pb2_grpc.LtdStub(self._channel)
        return self._stub

    def _reset(self):
        if self._channel is not None:
            self._channel.close()
        self._channel = self._stub = None
        self._answered = False

    def close(self):
        """Closes the connection (an attached job's stream with it)."""
        self._reset()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def reachable(self):
        """Whether ltd's socket takes a connection now."""
        return _try_connect(self.socket) == 0

    def _unreachable(self, err):
        return errors.Unreachable(
            "cannot reach ltd at %s: %s; start it with `ltd --socket %s` or `systemctl start ltd`"
            % (self.socket, os.strerror(err), self.socket),
            "UNAVAILABLE",
        )

    def _check_reachable(self, err=None):
        """Raises Unreachable unless ltd's socket takes a connection (``err``:
        what a try just now found)."""
        if err is None:
            err = _try_connect(self.socket)
        if err:
            self._reset()
            raise self._unreachable(err)

    def _error(self, e):
        """A grpc.RpcError as the ltd.Error that says it, in ltd's words or ours, never gRPC's."""
        code = e.code()
        cls = _CODES.get(code, errors.Error)
        if _ltds_own(e) and e.details():
            return cls(e.details(), code.name)
        if code in _LTD_ONLY_CODES and e.details():
            return cls(e.details(), code.name)  # an ltd older than the mark
        if code in _TRANSPORT_CODES:
            err = _try_connect(self.socket)
            if err:
                self._reset()
                return self._unreachable(err)
            if code in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL):
                return cls("ltd failed the request; try again, and see its log "
                           "(`journalctl -u ltd`) if it fails again", code.name)
            return errors.Unreachable("ltd is stopping or restarting; try again in a moment",
                                      code.name)
        return cls(_GRPC_OWN.get(code, "ltd refused the request (%s); try again, and see its log "
                                 "(`journalctl -u ltd`) if it fails again" % code.value[0]),
                   code.name)

    def _unary(self, method, request):
        self._check_reachable()
        try:
            # ltd was reachable just now: a connect that gRPC's non-blocking
            # socket finds refused (a full listen queue) is tried again.
            return getattr(self._api(), method)(request, timeout=_RPC_TIMEOUT, wait_for_ready=True)
        except grpc.RpcError as e:
            raise self._error(e) from None

    def _wait_for_ltd(self, lost, resume, say):
        """After a stream lost ltd: waits (bounded) until it takes connections again.

        ``say``: a function that tells the user (one line), or None.
        """
        if say:
            # Not gRPC's words for it ("Cancelling all calls", "Socket closed").
            say("ltd: lost ltd (it stopped or restarted); waiting for it to come back")
        self._reset()
        deadline = time.monotonic() + self.reconnect_for
        time.sleep(0.1)  # a stopping ltd may still accept for a moment
        while _try_connect(self.socket) != 0:
            if time.monotonic() > deadline:
                raise errors.Unreachable(
                    "ltd did not come back within %d s; its jobs may still run: `ltctl %s` once it is back"
                    % (self.reconnect_for, resume)
                )
            time.sleep(0.1)

    # -- verbs -------------------------------------------------------------------

    def submit(
        self,
        argv,
        devices,
        *,
        name=None,
        env=None,
        environ=None,
        cwd=None,
        heartbeat_timeout=None,
        startup_timeout=None,
        grace="10s",
        time_limit=None,
        hold_on_hang=None,
        max_restarts=0,
        auto_heartbeat=True,
        nnodes=1,
        node_rank=None,
        master_addr=None,
        master_port=0,
        run_id=None,
        rdzv=None,
        rdzv_timeout=None,
        rdzv_lease=None,
        rdzv_auth=None,
        after=(),
        dependency=None,
        detach=False,
        cancel_on_disconnect=False,
        output=None,
        error=None,
        mem=None,
        mem_per_rank=None,
        cpus=None,
        signal=None,
        label=None,
        array=None,
    ):
        """Starts a job of ``devices`` ranks running ``argv``; returns its :class:`Job`.

        As ``ltctl submit``: ``env`` (a mapping or ``K=V`` items) is ``--env``,
        applied over ``environ`` (default: this process's environment);
        ``cwd`` defaults to the current directory; durations are seconds, a
        ``timedelta`` or a text such as ``"10s"``. ``auto_heartbeat=False``
        is ``--no-auto-heartbeat``; ``after`` is ``--after`` (job ids or
        names); ``dependency`` is ``--dependency`` (``"afterany:7"``,
        ``"afternotok:7:8,singleton"``); ``time_limit`` is ``--time``, ``hold_on_hang`` ``--hold-on-hang``.
        ``mem`` and ``mem_per_rank`` (bytes, or a text such as ``"4G"``) and
        ``cpus`` (a number, 1.5 for one and a half) are ``--mem``,
        ``--mem-per-rank`` and ``--cpus``. Without ``detach`` the job's output stream is held open by
        the returned Job (``job.attach()``, ``job.events()``, ``job.wait()``
        go on from the job's first line); with ``cancel_on_disconnect`` the
        job is torn down when this stream goes away before the job ends
        (this process exits or crashes, the Job is dropped). ``output`` and
        ``error`` are ``--output``/``--error``: a file pattern, sbatch's
        (``%j`` the job id, ``%x`` the name, ``%t`` the rank, ``%n`` the
        node, ``%N`` the host, ``%u`` the user, ``%A``/``%a`` the array and
        task), that every rank's stdout
        (stderr) is also written to, opened as you. ``signal`` is
        ``--signal``: ``"USR1@90s"``, or a pair (signal, time before the end).
        ``label``: what ``ps`` and ``show`` print as the job's command instead of
        ``argv``. ``rdzv_auth`` is ``--rdzv-auth``: ``"munge"`` or ``"none"``
        (default: ltd's). ``array`` is ``--array`` (``"0-15%4"``): one job
        per task, always detached; the Job returned is the whole array's
        (its id; ``wait()`` waits for every task and returns the highest
        exit code, ``kill()`` ends every task; ``client.show(id)`` lists
        them in ``array_tasks``).
        """
        if isinstance(argv, (str, bytes)):
            raise errors.InvalidArgument(
                "argv is a list of the program and its arguments, e.g. ['python3', 'train.py']"
            )
        argv = [_bytes(a, "argv") for a in argv]
        if not argv:
            raise errors.InvalidArgument("no program given: argv is empty")
        if not isinstance(devices, int) or isinstance(devices, bool) or devices < 1:
            raise errors.InvalidArgument("devices must be an integer of at least 1")
        if rdzv_auth not in (None, "munge", "none"):
            raise errors.InvalidArgument("rdzv_auth must be 'munge' or 'none' (or None: ltd's)")
        try:
            req = ltd_pb2.SubmitRequest(
                batched=True,  # output lines come many to an event
                devices=devices,
                name=_bytes(name or "", "name"),
                argv=argv,
                cwd=_bytes(os.path.abspath(cwd if cwd is not None else os.getcwd()), "cwd"),
                env=_env_list(os.environ if environ is None else environ, "environ"),
                extra_env=_env_list(env, "env"),
                heartbeat_timeout_ms=to_ms(heartbeat_timeout, "heartbeat_timeout"),
                startup_timeout_ms=to_ms(startup_timeout, "startup_timeout"),
                grace_ms=to_ms(grace, "grace"),
                time_limit_ms=to_ms(time_limit, "time_limit", bare_ms=60_000),
                hold_on_hang_ms=to_ms(hold_on_hang, "hold_on_hang"),
                max_restarts=max_restarts,
                detach=detach,
                no_auto_heartbeat=not auto_heartbeat,
                nnodes=nnodes,
                master_addr=_bytes(master_addr or "", "master_addr"),
                master_port=master_port,
                run_id=_bytes(run_id or "", "run_id"),
                rdzv=_bytes(rdzv or "", "rdzv"),
                rdzv_timeout_ms=to_ms(rdzv_timeout, "rdzv_timeout"),
                rdzv_lease_ms=to_ms(rdzv_lease, "rdzv_lease"),
                rdzv_auth=rdzv_auth or "",
                after=[_bytes(a, "after") for a in after],
                dependency=_bytes(dependency or "", "dependency"),
                cancel_on_disconnect=cancel_on_disconnect and not detach and not array,
                output=_bytes(output or "", "output"),
                error=_bytes(error or "", "error"),
                label=_bytes(label or "", "label"),
                array=_bytes(array or "", "array"),
            )
        except ValueError as e:
            raise errors.InvalidArgument(str(e)) from None
        if node_rank is not None:
            req.node_rank = node_rank
        if signal is not None:
            if isinstance(signal, str):
                sig, at, before = signal.partition("@")
                if not at:
                    raise errors.InvalidArgument(
                        "signal %r: use SIG@DUR, e.g. USR1@90s" % (signal,))
            else:
                sig, before = signal
            req.warn_signal = parse_signal(sig)
            try:
                req.warn_signal_before_ms = to_ms(before, "signal")
            except ValueError as e:
                raise errors.InvalidArgument(str(e)) from None
        # Our umask: the output files are created with it, as a shell would.
        req.umask = _umask()
        req.mem_bytes = _size(mem, "mem")
        req.mem_per_rank_bytes = _size(mem_per_rank, "mem_per_rank")
        if cpus is not None:
            if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or not 0 < cpus <= 1e6:
                raise errors.InvalidArgument("cpus must be a number of CPUs such as 4 or 1.5")
            req.cpu_millis = max(1, int(round(cpus * 1000)))
        # A token of our own: a submit that loses ltd before its answer is
        # sent again with it, and ltd answers with the job it made, if any.
        req.submit_token = os.urandom(16).hex().encode()
        stream, first = self._send_submit(req)
        job_id = first.accepted
        if detach or array:
            stream.cancel()
            stream = None
        at = first.at if stream is not None and first.HasField("at") else None
        return Job(self, job_id, stream=stream, cancel_on_disconnect=req.cancel_on_disconnect,
                   array=bool(array), at=at)

    def _send_submit(self, req):
        """Sends ``req`` until ltd accepts it; (stream, its first event).

        When ltd goes away before it answers (it stops, restarts or
        crashes), waits for it (bounded by ``reconnect_for``) and sends the
        same request, token and all, as ltctl does. The socket is checked
        first only on a channel that has not answered yet: one connect of
        our own a client, not two a submit (ltd accepts each).
        """
        told = False
        while True:
            if not self._answered:
                self._check_socket()
            # A channel that answered before went unchecked: should this
            # send fail as ltd going away, the checks come first again.
            unchecked = self._answered
            stream = self._api().Submit(req)
            try:
                first = next(stream)
                self._answered = True
                return stream, first
            except grpc.RpcError as e:
                if not _going_away(e):
                    raise self._error(e) from None
                if unchecked:
                    self._reset()
                    continue
                if not told:
                    print("ltd: ltd went away before it answered (it is stopping or restarting); "
                          "waiting for it to come back to submit again", file=sys.stderr, flush=True)
                    told = True
                self._wait_for_ltd(e, "ps", None)
            except StopIteration:
                raise errors.Error("ltd ended the submit without accepting the job") from None

    def _check_socket(self):
        """Before a submit: waits up to a minute while nothing listens on the
        socket (ltd crashed, or is between two runs of a restart), then
        raises Unreachable unless it takes a connection. One answer decides:
        a second look after a connection was taken could meet an ltd killed
        in between, and say it never ran."""
        err = _try_connect(self.socket)
        if err == _errno.ECONNREFUSED:
            print("ltd: ltd at %s does not answer (it is restarting, or it crashed); waiting up to "
                  "a minute for it" % self.socket, file=sys.stderr, flush=True)
            deadline = time.monotonic() + 60
            while err == _errno.ECONNREFUSED and time.monotonic() < deadline:
                time.sleep(0.1)
                err = _try_connect(self.socket)
        self._check_reachable(err)

    def ps(self, all=False, *, me=False, user=None, state=None, no_trunc=False) -> List[JobInfo]:
        """Running and pending jobs (``all``: finished ones too), oldest first.

        As ``ltctl ps``: ``me`` lists only your jobs; ``user`` (a name, a
        uid or a list of them) only those users'; ``state`` (``"FAILED"``,
        ``"PENDING,RUNNING"`` or a list) only jobs in those states, finished
        ones too; ``no_trunc`` keeps each command whole (up to 16 KiB).
        """
        users = [user] if isinstance(user, (str, bytes, int)) else list(user or ())
        if isinstance(state, str):
            state = [s for s in state.split(",") if s]
        states = []
        for s in state or ():
            name = str(s).upper()
            if name not in ltd_pb2.Job.State.keys() or name == "STATE_UNSPECIFIED":
                raise errors.InvalidArgument(
                    "state %r is not a job state; use PENDING, STARTING, RUNNING, SUCCEEDED, "
                    "FAILED, CANCELLED, LOST, TIMEOUT, OUT_OF_MEMORY or NODE_FAIL" % (s,)
                )
            states.append(ltd_pb2.Job.State.Value(name))
        req = ltd_pb2.ListRequest(
            all=all,
            me=me,
            users=[_bytes(str(u) if isinstance(u, int) else u, "user") for u in users],
            states=states,
            no_trunc=no_trunc,
        )
        self._check_reachable()
        jobs = []
        try:
            pages = self._api().List(req, timeout=60, wait_for_ready=True)
            for page in pages:
                jobs.extend(JobInfo.from_proto(j) for j in page.jobs)
        except grpc.RpcError as e:
            raise self._error(e) from None
        return jobs

    def show(self, job) -> JobInfo:
        """One job (an id or a name) as ltd has it now."""
        return JobInfo.from_proto(self._unary("Show", ltd_pb2.JobRef(job=_job_ref(job))))

    def job(self, job) -> "Job":
        """The job of that id or name (a name: your own jobs first; the one still running)."""
        info = self.show(job)
        return Job(self, info.id, info=info)

    def kill(self, job, signal=None):
        """Tears the job down (``signal``: only sends it to every rank); returns its id."""
        req = ltd_pb2.KillRequest(job=_job_ref(job), signal=parse_signal(signal))
        return self._unary("Kill", req).job_id

    def stacks(self, job, rank=None):
        """Where each rank of a running job is now, without stopping it (``ltctl stack``).

        A list of dicts, one per rank: ``rank``, ``pid``, ``state`` (the
        kernel's, ``"S (sleeping)"``), ``kind`` (``"python"``: faulthandler's
        frames, ``"native"``: eu-stack's, ``""``: none), ``frames``,
        ``kernel`` (each thread's state and wchan) and ``note`` (why frames
        are missing). The job's owner, root or ltd's admin group only.
        """
        req = ltd_pb2.StackRequest(job=_job_ref(job))
        if rank is not None:
            req.rank = rank
        reply = self._unary("Stack", req)
        return [
            {"rank": r.rank, "pid": r.pid, "state": r.state, "kind": r.kind,
             "frames": r.frames, "kernel": r.kernel, "note": r.note}
            for r in reply.ranks
        ]

    def drain(self, reason=""):
        """Root or ltd's admin group: no job starts until :meth:`resume`; running ones go on.

        Pending jobs say ``ltd is draining: REASON``; the drain outlives an
        ltd restart. Returns a dict: draining, reason, running, pending.
        """
        reply = self._unary("Drain", ltd_pb2.DrainRequest(reason=_bytes(reason, "reason")))
        return self._drain_dict(reply)

    def resume(self):
        """Ends a drain (root or ltd's admin group); returns as :meth:`drain`."""
        return self._drain_dict(self._unary("Resume", ltd_pb2.ResumeRequest()))

    @staticmethod
    def _drain_dict(reply):
        return {
            "draining": reply.draining,
            "reason": reply.reason,
            "running": reply.running,
            "pending": reply.pending,
        }

    def gpus(self):
        """Every device slot, as dicts: slot, gpu, minor (of /dev/nvidiaN; None
        unknown), state (FREE/BUSY/QUARANTINED), job_id, user, and processes:
        each compute process on the GPU as NVML last saw it (pid, user,
        memory_mib; None where NVML cannot tell)."""
        reply = self._unary("Gpus", ltd_pb2.GpusRequest())
        return [
            {
                "slot": s.slot,
                "gpu": s.gpu,
                "minor": s.minor if s.HasField("minor") else None,
                "state": ltd_pb2.Slot.State.Name(s.state),
                "job_id": s.job_id,
                "user": s.user,
                "processes": [
                    {
                        "pid": p.pid,
                        "user": p.user,
                        "memory_mib": p.memory_mib if p.HasField("memory_mib") else None,
                    }
                    for p in s.processes
                ],
            }
            for s in reply.slots
        ]
