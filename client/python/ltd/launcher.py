"""``ltd.launch(fn, *args, devices=N)``: ``fn(*args)`` on N supervised ranks, from a notebook or a script.

Each rank is a fresh interpreter (``python -m ltd._rank``), never a fork of
the caller, so CUDA initialised in a notebook's kernel is no problem. The
function and its arguments travel by value (cloudpickle) through a
temporary directory of the caller's, as does each result back. The job runs
under ltd when its socket is reachable, else under ``ltrun`` as a child of
the caller; either way nothing of it outlives the call:

- KeyboardInterrupt (a notebook's interrupt) tears the job down and is
  raised again once every rank is gone;
- the caller dying (a kernel shut down or crashed) takes the job with it:
  under ltd the submit asks to be cancelled when its client goes away,
  under ltrun ltrun tears the job down when its parent dies.
"""

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

from ltd import errors
from ltd._durations import to_ms, to_text
from ltd.types import HangReport, RootCause, describe_cause

__all__ = ["launch"]

# How long one wait for an event may block, so that a KeyboardInterrupt
# reaches the caller's thread promptly whatever the transport does.
_POLL = 0.2


def _cells():
    """The notebook's cells, by the file name their code carries: {name: {number, source}}."""
    try:
        from IPython import get_ipython
    except ImportError:
        return {}
    ip = get_ipython()
    names = getattr(getattr(ip, "compile", None), "_filename_map", None)
    if not names:
        return {}
    import linecache

    cells = {}
    for filename, number in names.items():
        entry = linecache.cache.get(filename)
        if entry and entry[2]:
            cells[filename] = {"number": number, "source": "".join(entry[2])}
    return cells


def _package_root():
    """The directory that holds this ``ltd`` package, for the ranks' PYTHONPATH."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _find_ltrun(given):
    candidates = [given, os.environ.get("LTRUN")]
    here = os.path.dirname(os.path.abspath(__file__))
    # The build tree (build/python/ltd -> build/daemon/ltrun), then an
    # install (PREFIX/lib/python3.X/dist-packages/ltd -> PREFIX/bin/ltrun).
    candidates.append(os.path.join(here, "..", "..", "daemon", "ltrun"))
    candidates.append(os.path.join(here, "..", "..", "..", "..", "bin", "ltrun"))
    candidates.append(shutil.which("ltrun"))
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    raise errors.Error("cannot find ltrun (beside this package, on PATH or in $LTRUN); install ltd or pass ltrun=PATH")


def _rank_env(env):
    """The ranks' environment: the caller's, with this package importable and ``env`` over it."""
    environ = dict(os.environ)
    # A notebook's inline matplotlib backend exists only in a kernel.
    if environ.get("MPLBACKEND", "").startswith("module://matplotlib_inline"):
        del environ["MPLBACKEND"]
    # Lines into the cell as they come, not when a pipe's buffer fills.
    environ.setdefault("PYTHONUNBUFFERED", "1")
    root = _package_root()
    path = environ.get("PYTHONPATH", "")
    environ["PYTHONPATH"] = root + (os.pathsep + path if path else "")
    extra = dict(env or {})
    return environ, extra


class _Printer:
    """Rank lines into the caller's stdout/stderr, as ``[RANK] line``, from the caller's thread."""

    def __init__(self, stdout, stderr):
        self.stdout = stdout
        self.stderr = stderr

    def line(self, text, is_stderr):
        out = (self.stderr or sys.stderr) if is_stderr else (self.stdout or sys.stdout)
        out.write(text + "\n")

    def flush(self):
        for out in (self.stdout or sys.stdout, self.stderr or sys.stderr):
            try:
                out.flush()
            except (OSError, ValueError):
                pass


def _pump(events, printer, on_interrupt):
    """Prints queued events until the end arrives; returns it.

    ``events`` holds ("line", text, is_stderr), ("end", value) or ("error",
    exc). KeyboardInterrupt calls ``on_interrupt(n)`` (n: how many so far)
    and goes on waiting for the end, which it then raises again.
    """
    interrupts = 0
    while True:
        item = None
        try:
            try:
                item = events.get(timeout=_POLL)
            except queue.Empty:
                printer.flush()
                continue
            if item[0] == "line":
                printer.line(*item[1:])
                if events.empty():
                    printer.flush()
                continue
        except KeyboardInterrupt:
            interrupts += 1
            on_interrupt(interrupts)
            if item is None or item[0] == "line":
                continue
        # The end (or the reader's error): taken off the queue, so handled
        # now even if an interrupt came just after it.
        printer.flush()
        if item[0] == "error":
            raise item[1]
        return item[1], interrupts


class _Outcome:
    def __init__(self, job_id, state, exit_code, root_cause, hang_report):
        self.job_id = job_id
        self.state = state
        self.exit_code = exit_code
        self.root_cause = root_cause
        self.hang_report = hang_report


def _job_name(fn):
    """A job name after the function: its name as a job name may be ("train"; "lambda")."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "", getattr(fn, "__name__", "") or "") or "launch"
    return name if not name.isdigit() else "fn" + name


def _via_ltd(client, argv, devices, opts, env, extra, detach, printer):
    from ltd.job import Ended, Notice, Output

    def submit(name):
        return client.submit(
            argv,
            devices,
            name=name,
            environ=env,
            env=extra,
            heartbeat_timeout=opts["heartbeat_timeout"],
            startup_timeout=opts["startup_timeout"],
            grace=opts["grace"],
            auto_heartbeat=opts["auto_heartbeat"],
            cancel_on_disconnect=not detach,
            label=opts["label"],
        )

    if opts["name"]:
        job = submit(opts["name"])
    else:
        # Named after the function; while a launch of it still runs, the
        # next is train-2, train-3, ... (a user's live jobs have names of
        # their own).
        for n in range(1, 101):
            name = opts["default_name"] if n == 1 else "%s-%d" % (opts["default_name"], n)
            try:
                job = submit(name)
                break
            except errors.Error as e:
                if e.code != "ALREADY_EXISTS":
                    raise
        else:
            job = submit(None)
    events = queue.Queue()

    def read():
        try:
            for ev in job.events(output=True):
                if isinstance(ev, Output):
                    events.put(("line", "[%d] %s" % (ev.rank, ev.text), ev.stderr))
                elif isinstance(ev, Notice):
                    events.put(("line", ev.text, True))
                elif isinstance(ev, Ended):
                    events.put(("end", ev))
                    return
            events.put(("error", errors.Error("the stream of job %s ended without its end" % job.id)))
        except BaseException as e:  # noqa: B902 - handed to the caller's thread
            events.put(("error", e))

    threading.Thread(target=read, name="ltd-launch-%s" % job.id, daemon=True).start()

    def interrupt(n):
        try:
            if n == 1:
                print("ltd: tearing down job %s (interrupt again to kill every rank at once)" % job.id,
                      file=sys.stderr, flush=True)
                job.kill()
            else:
                job.kill(signal.SIGKILL)
        except errors.FailedPrecondition:
            pass  # it ended meanwhile; its end is on the way

    try:
        ended, interrupts = _pump(events, printer, interrupt)
    except BaseException:
        # Our side failed (not the job): take the job down with it.
        try:
            job.kill()
        except errors.Error:
            pass
        raise
    hang = None
    cause = ended.root_cause
    if ended.state != "SUCCEEDED":
        info = job.refresh().info  # the hang report, the rank's own error text
        hang = info.hang_report
        cause = info.root_cause or cause
    return _Outcome(ended.job_id, ended.state, ended.exit_code, cause, hang), interrupts


def _via_ltrun(ltrun, argv, devices, opts, env, extra, workdir, printer):
    report = os.path.join(workdir, "report.json")
    cmd = [ltrun, "--devices", str(devices), "--die-with-parent", "--report", report,
           "--grace", to_text(opts["grace"], "grace")]
    cmd += ["--name", opts["name"] or opts["default_name"]]
    if opts["heartbeat_timeout"] is not None:
        cmd += ["--heartbeat-timeout", to_text(opts["heartbeat_timeout"], "heartbeat_timeout")]
    if opts["startup_timeout"] is not None:
        cmd += ["--startup-timeout", to_text(opts["startup_timeout"], "startup_timeout")]
    if not opts["auto_heartbeat"]:
        cmd.append("--no-auto-heartbeat")
    for k, v in extra.items():
        cmd += ["--env", "%s=%s" % (k, v)]
    cmd += ["--"] + argv
    # Its own session: a signal to the caller's process group (a kernel
    # interrupt) reaches ltrun only through us, once.
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, start_new_session=True)
    events = queue.Queue()
    readers = []
    for pipe, is_stderr in ((proc.stdout, False), (proc.stderr, True)):
        def read(pipe=pipe, is_stderr=is_stderr):
            for raw in iter(pipe.readline, b""):
                events.put(("line", raw.rstrip(b"\n").decode("utf-8", "backslashreplace"), is_stderr))
            pipe.close()

        t = threading.Thread(target=read, daemon=True)
        t.start()
        readers.append(t)

    def wait():
        for t in readers:
            t.join()
        events.put(("end", proc.wait()))

    threading.Thread(target=wait, daemon=True).start()

    def interrupt(n):
        # ltrun: the first SIGTERM tears the job down, a second kills it at once.
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)

    try:
        code, interrupts = _pump(events, printer, interrupt)
    except BaseException:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait()
        raise
    try:
        with open(report) as f:
            record = json.load(f)
    except (OSError, ValueError):
        raise errors.Error("ltrun exited with code %d and wrote no report; see its output above" % code) from None
    cause = RootCause.from_record(record["root_cause"]) if record.get("root_cause") else None
    hang = HangReport.from_record(record["hang_report"]) if record.get("hang_report") else None
    state = record.get("state", "FAILED")
    exit_code = record.get("exit_code")
    return _Outcome(record.get("id", ""), state, code if exit_code is None else exit_code, cause, hang), interrupts


def _failure(outcome, via):
    c = outcome.root_cause
    if c is not None and c.rank is not None and c.message and c.reason in ("exited", "signaled"):
        message = "rank %d: %s" % (c.rank, c.message)
    elif c is not None:
        message = describe_cause(c)
    else:
        message = "job %s ended %s" % (outcome.job_id, outcome.state)
    where = "job %s" % outcome.job_id if via == "ltd" else "ltrun"
    return errors.JobFailed(
        "%s (%s %s, exit code %d)" % (message, where, outcome.state, outcome.exit_code),
        outcome.job_id, outcome.state, outcome.exit_code, c, outcome.hang_report,
    )


def launch(
    fn,
    *args,
    devices=1,
    via="auto",
    return_all=False,
    name=None,
    env=None,
    heartbeat_timeout=None,
    startup_timeout=None,
    grace="10s",
    auto_heartbeat=True,
    detach=False,
    socket=None,
    ltrun=None,
    python=None,
    stdout=None,
    stderr=None,
):
    """Runs ``fn(*args)`` on ``devices`` ranks with torchrun's environment; rank 0's return value.

    ``via``: ``"ltd"``, ``"ltrun"`` or ``"auto"`` (ltd when its socket, given
    or ``$LTD_SOCKET`` or the default, is reachable; else ltrun).
    ``return_all``: a list of every rank's value instead. ``env``: extra
    variables for the ranks. ``heartbeat_timeout``, ``startup_timeout``,
    ``grace``, ``auto_heartbeat``, ``name``: as for ``ltctl submit``.
    ``detach``: under ltd, the job is not cancelled when this process goes
    away (it still is on KeyboardInterrupt). ``python``: the ranks'
    interpreter (default: this one). ``stdout``/``stderr``: where the
    ranks' ``[RANK] line`` output goes (default: sys.stdout/sys.stderr).

    A failure raises :class:`ltd.JobFailed`: its message is the root
    cause (``rank 1: ValueError: bad batch (cell 4, line 3)``), its
    attributes ``rank``, ``reason``, ``exit_code``, ``hang_report``,
    ``job_id``. KeyboardInterrupt tears the job down first, then is raised.
    """
    import cloudpickle

    if not callable(fn):
        raise errors.InvalidArgument("launch needs a function to run, got %s" % type(fn).__name__)
    if not isinstance(devices, int) or isinstance(devices, bool) or devices < 1:
        raise errors.InvalidArgument("devices must be an integer of at least 1")
    if via not in ("auto", "ltd", "ltrun"):
        raise errors.InvalidArgument("via must be 'auto', 'ltd' or 'ltrun', got %r" % (via,))
    for what, value in (("heartbeat_timeout", heartbeat_timeout), ("startup_timeout", startup_timeout),
                        ("grace", grace)):
        try:
            to_ms(value, what)
        except ValueError as e:
            raise errors.InvalidArgument(str(e)) from None
    client = None
    if via in ("auto", "ltd"):
        from ltd.client import Client

        client = Client(socket)
        if via == "auto":
            via = "ltd" if client.reachable() else "ltrun"
        elif not client.reachable():
            client._check_reachable()  # raises ltd.Unreachable with the reason
    ltrun_path = _find_ltrun(ltrun) if via == "ltrun" else None

    workdir = tempfile.mkdtemp(prefix="ltd-launch-")  # 0700, the caller's
    try:
        try:
            payload = cloudpickle.dumps((fn, args))
        except Exception as e:
            raise errors.Error("cannot pickle the function or its arguments for the ranks: %s: %s"
                               % (type(e).__name__, e)) from e
        with open(os.path.join(workdir, "payload.pkl"), "wb") as f:
            f.write(payload)
        with open(os.path.join(workdir, "meta.json"), "w") as f:
            json.dump({"sys_path": [p for p in sys.path if p], "cells": _cells(),
                       "return_all": bool(return_all)}, f)
        argv = [python or sys.executable, "-m", "ltd._rank", workdir]
        environ, extra = _rank_env(env)
        opts = dict(name=name, heartbeat_timeout=heartbeat_timeout, startup_timeout=startup_timeout,
                    grace=grace, auto_heartbeat=auto_heartbeat, default_name=_job_name(fn),
                    label="launch %s(%s)" % (_job_name(fn), "..." if args else ""))
        printer = _Printer(stdout, stderr)
        if via == "ltd":
            outcome, interrupts = _via_ltd(client, argv, devices, opts, environ, extra, detach, printer)
        else:
            outcome, interrupts = _via_ltrun(ltrun_path, argv, devices, opts, environ, extra, workdir, printer)
        if interrupts:
            raise KeyboardInterrupt
        if outcome.state != "SUCCEEDED" or outcome.exit_code != 0:
            if outcome.hang_report is not None and via == "ltd":
                print(str(outcome.hang_report), file=stderr or sys.stderr, flush=True)
            raise _failure(outcome, via)
        ranks = range(devices) if return_all else [0]
        values = []
        for r in ranks:
            path = os.path.join(workdir, "result.%d.pkl" % r)
            try:
                with open(path, "rb") as f:
                    values.append(cloudpickle.loads(f.read()))
            except FileNotFoundError:
                raise errors.Error("rank %d exited 0 but left no return value (did it call os._exit?)" % r) from None
            except Exception as e:
                raise errors.Error("cannot unpickle rank %d's return value here: %s: %s"
                                   % (r, type(e).__name__, e)) from e
        return values if return_all else values[0]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if client is not None:
            client.close()
