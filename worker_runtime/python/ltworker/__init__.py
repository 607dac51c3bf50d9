"""Heartbeats from a training rank to ltd (docs/protocol.md, "Heartbeats").

ltd gives every rank a writable file descriptor named by LT_HEARTBEAT_FD
(always 3). This module writes the protocol's lines to it::

    import ltworker
    for step, batch in enumerate(loader):
        ...
        ltworker.heartbeat(step)

Without LT_HEARTBEAT_FD (the script runs outside ltd) every call is a cheap
no-op, so the same script runs anywhere.

Calls never block the training loop for long and never raise because of the
fd: a line that cannot be written right now (ltd is behind, or gone) is
dropped, since a late heartbeat is worth nothing. They return True when the
line was written and False when it was not (disabled or dropped). Invalid
arguments (a negative step, say) raise ValueError/TypeError: those are bugs
in the caller, and raising outside ltd too makes them visible early.

Pure Python, standard library only; importing it imports no ML framework.
The Lightning callback lives in ``ltworker.lightning``.
"""

import datetime
import fcntl
import operator
import os
import re
import select
import signal
import socket
import stat
import threading

__all__ = [
    "enabled",
    "heartbeat",
    "set_timeout",
    "report_error",
    "parse_duration",
    "MAX_LINE_BYTES",
    "MAX_TIMEOUT_SECONDS",
]

# The longest line written, newline included. It stays below PIPE_BUF (4096)
# so a write to a pipe is atomic and lines of concurrent writers (threads,
# forked DataLoader workers, shells) never interleave; ltd treats longer lines
# as malformed.
MAX_LINE_BYTES = 4095

# The longest heartbeat timeout ltd accepts (365 days), LT_MAX_TIMEOUT_MS of
# the C library; set_timeout sends a longer one as this.
MAX_TIMEOUT_SECONDS = 365 * 24 * 3600
_TRUNCATION_MARK = b"..."

# Control characters (newlines included) would break the line apart.
_CONTROL_TO_SPACE = {c: " " for c in list(range(0x20)) + [0x7F]}


class _Channel:
    """The heartbeat fd, and how to write to it without blocking.

    The fd is shared with shells and child processes, so its flags are never
    changed (no O_NONBLOCK). Sockets get a per-call MSG_DONTWAIT; for pipes a
    zero-timeout poll checks that a line fits before writing it.
    """

    def __init__(self, fd):
        self.fd = fd
        self._sock = None
        self._poller = None
        mode = os.fstat(fd).st_mode
        if stat.S_ISSOCK(mode):
            # socket.send needs a socket object; it owns a private dup (not
            # inheritable), so closing it never closes ltd's fd.
            self._sock = socket.socket(fileno=os.dup(fd))
        elif stat.S_ISFIFO(mode):
            self._poller = select.poll()
            self._poller.register(fd, select.POLLOUT)

    def close(self):
        if self._sock is not None:
            self._sock.close()

    def write(self, line):
        try:
            if self._sock is not None:
                flags = socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL
                return self._sock.send(line, flags) == len(line)
            if self._poller is not None:
                return self._write_pipe(line)
            return os.write(self.fd, line) == len(line)
        except OSError:
            # BlockingIOError (ltd is behind), BrokenPipeError (ltd is gone),
            # and anything else: drop the line, never break training.
            return False

    def _write_pipe(self, line):
        events = self._poller.poll(0)
        if not events:
            return False  # full: the write could block
        revents = events[0][1]
        if revents & select.POLLERR and not revents & select.POLLOUT:
            return False  # no reader left
        # Python ignores SIGPIPE unless the program restored the default
        # action, which would kill the rank if the reader vanishes between
        # poll and write. Block it for this thread around the write and
        # consume the one the write raised.
        if signal.getsignal(signal.SIGPIPE) != signal.SIG_DFL:
            return os.write(self.fd, line) == len(line)
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
        try:
            return os.write(self.fd, line) == len(line)
        except BrokenPipeError:
            if signal.SIGPIPE not in old:
                signal.sigtimedwait({signal.SIGPIPE}, 0)
            return False
        finally:
            if signal.SIGPIPE not in old:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)


_lock = threading.Lock()
_UNSET = object()
_channel = _UNSET  # a _Channel, None when disabled, _UNSET before first use


def _open_channel():
    value = os.environ.get("LT_HEARTBEAT_FD", "")
    if not value.isdigit() or not value.isascii():
        return None
    fd = int(value)
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        if flags & os.O_ACCMODE == os.O_RDONLY:
            return None
        return _Channel(fd)
    except (OSError, ValueError, OverflowError):
        # Closed or unusable: the variable was inherited from somewhere it no
        # longer holds. Stay quiet, as outside ltd.
        return None


def _get_channel():
    global _channel
    channel = _channel
    if channel is _UNSET:
        with _lock:
            if _channel is _UNSET:
                _channel = _open_channel()
            channel = _channel
    return channel


def _reset_for_testing():
    """Forgets LT_HEARTBEAT_FD and the program's own beats, so the next call
    reads it again."""
    global _channel, _own_beats_sent
    _own_beats_sent = False
    with _lock:
        if _channel not in (_UNSET, None):
            _channel.close()
        _channel = _UNSET


def _send(line):
    channel = _get_channel()
    if channel is None:
        return False
    return channel.write(line)


# Set once the program sends a heartbeat or timeout line of its own: ltd
# then watches this rank by those, and ltd's automatic heartbeat module, if
# it runs here, stops sending its own (it reads this flag from its thread).
_own_beats_sent = False


def _send_own(line):
    """Sends one of the program's own beats. The flag is set before the line
    goes out: set after, the module's thread could run between the two (a
    busy machine) and send a whole interval's line after the program's beat."""
    global _own_beats_sent
    _own_beats_sent = True
    return _send(line)


def enabled():
    """True when running under ltd (LT_HEARTBEAT_FD is set and usable)."""
    return _get_channel() is not None


def heartbeat(step=None):
    """Sends ``hb`` (alive) or ``hb STEP`` (alive at progress counter STEP >= 0).

    ``step`` may be any integer-like value (int, numpy integer, 0-d integer
    tensor).
    """
    if step is None:
        return _send_own(b"hb\n")
    step = operator.index(step)
    if step < 0:
        raise ValueError(f"heartbeat step must be >= 0, got {step}")
    return _send_own(b"hb %d\n" % step)


def _format_timeout(milliseconds):
    # The same spellings as the C library: "0", whole seconds, or ms.
    if milliseconds == 0:
        return b"timeout 0\n"
    if milliseconds % 1000 == 0:
        return b"timeout %ds\n" % (milliseconds // 1000)
    return b"timeout %dms\n" % milliseconds


def _timeout_ms(seconds):
    """Whole milliseconds for set_timeout: 0 only for an explicit zero.

    A positive timeout rounds up to at least 1 ms, since "timeout 0" would turn
    the watchdog off; one above MAX_TIMEOUT_SECONDS becomes that, since ltd
    ignores longer ones. Floats are rounded to whole microseconds first, so
    1.1 (binary 1.1000000000000000888) is 1100 ms and not 1101.
    """
    if isinstance(seconds, bool):
        raise TypeError("timeout must be seconds or a timedelta, got a bool")
    if isinstance(seconds, datetime.timedelta):
        if seconds < datetime.timedelta(0):
            raise ValueError(f"timeout must be >= 0, got {seconds}")
        microseconds = seconds // datetime.timedelta(microseconds=1)  # exact
    else:
        if not isinstance(seconds, (int, float)):
            try:
                seconds = float(seconds)
            except (TypeError, ValueError):
                raise TypeError(
                    f"timeout must be seconds or a timedelta, got {seconds!r}") from None
        if seconds != seconds or seconds < 0 or seconds == float("inf"):
            raise ValueError(f"timeout must be finite and >= 0 (0: watchdog off), got {seconds}")
        if seconds == 0:
            return 0
        if seconds >= MAX_TIMEOUT_SECONDS:
            return MAX_TIMEOUT_SECONDS * 1000
        microseconds = max(1, round(seconds * 1_000_000))
    return min(-(-microseconds // 1000), MAX_TIMEOUT_SECONDS * 1000)


def set_timeout(seconds):
    """Sends ``timeout DUR``: this rank's heartbeat deadline from now on.

    ``seconds`` is a number of seconds or a datetime.timedelta. It arms the
    rank's watchdog even if the job was submitted without
    ``--heartbeat-timeout``. Only 0 turns the watchdog off: a positive timeout
    rounds up to whole milliseconds (0.0004 is 1 ms), and one longer than
    MAX_TIMEOUT_SECONDS (365 days, the longest ltd accepts) is sent as that.
    A negative, NaN or infinite one raises ValueError.
    """
    return _send_own(_format_timeout(_timeout_ms(seconds)))


def _format_error(text):
    text = str(text).translate(_CONTROL_TO_SPACE).encode("ascii", "replace")
    if not text:
        return b"error\n"
    room = MAX_LINE_BYTES - len(b"error \n")
    if len(text) > room:
        text = text[: room - len(_TRUNCATION_MARK)] + _TRUNCATION_MARK
    return b"error " + text + b"\n"


def report_error(text):
    """Sends ``error TEXT``: this rank's account of a failure.

    It becomes the job's root-cause message if this rank is the root cause.
    Control characters become spaces, non-ASCII characters '?', and text
    that would make the line 4096 bytes or longer is cut and ends in "...".
    """
    return _send(_format_error(text))


_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS = {None: 1.0, "s": 1.0, "ms": 0.001, "m": 60.0, "h": 3600.0}


def parse_duration(text):
    """Seconds in a duration as ltd spells them: "500ms", "10s", "5m", "2h",
    or plain seconds. Raises ValueError for anything else."""
    match = _DURATION.match(str(text))
    if match is None:
        raise ValueError(f"not a duration: {text!r} (use 500ms, 10s, 5m, 2h or seconds)")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
