"""Arguments of ``ltd.Client`` calls as ltd's requests take them: bytes,
sizes, environments, signals; and this process's umask."""

import os
import signal as _signal

from ltd import errors


def _umask():
    """This process's umask, read without changing it where Linux can say."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8) & 0o777
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)  # a kernel before 4.7: set it and set it back
    os.umask(mask)
    return mask & 0o777


_SIZE_UNITS = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}


def _size(value, what):
    """Bytes, as ltctl's sizes: an int, or a text such as "512M" or "4G"; None: 0."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str):
        text = value.strip().upper().removesuffix("B").removesuffix("I")
        digits = text.rstrip("KMGT")
        if digits.isdigit() and text[len(digits):] in _SIZE_UNITS and int(digits) > 0:
            return int(digits) << _SIZE_UNITS[text[len(digits):]]
    raise errors.InvalidArgument("%s takes a size such as 512M or 4G, got %r" % (what, value))


def _bytes(value, what):
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return os.fsencode(value)
    if isinstance(value, os.PathLike):
        return os.fsencode(value)
    raise errors.InvalidArgument("%s must be str or bytes, not %s" % (what, type(value).__name__))


def _job_ref(job):
    """JOB as ltd takes it: an id (an int too) or a name."""
    if isinstance(job, int) and not isinstance(job, bool):
        job = str(job)
    return _bytes(job, "job")


def _env_list(env, what):
    """``env`` (a mapping, K=V items, or one K=V text, as one ``--env``) as K=V bytes."""
    if env is None:
        return []
    if env is os.environ:
        # This process's own: as bytes already (os.environb, the same
        # store), not each key and value decoded and encoded back.
        out = []
        for k, v in os.environb.items():
            if not k or b"=" in k:
                raise errors.InvalidArgument("%s key %r must be non-empty and have no '='" % (what, k))
            out.append(k + b"=" + v)
        return out
    if isinstance(env, (str, bytes, os.PathLike)):
        # One KEY=VALUE, as one --env: never its characters, one by one.
        env = [env]
    items = env.items() if hasattr(env, "items") else None
    out = []
    if items is not None:
        for k, v in items:
            k, v = _bytes(k, what + " key"), _bytes(v, what + " value")
            if not k or b"=" in k:
                raise errors.InvalidArgument("%s key %r must be non-empty and have no '='" % (what, k))
            out.append(k + b"=" + v)
        return out
    for kv in env:
        kv = _bytes(kv, what)
        if b"=" not in kv or kv.startswith(b"="):
            raise errors.InvalidArgument("%s takes KEY=VALUE, got %r" % (what, kv))
        out.append(kv)
    return out


def parse_signal(sig):
    """A signal as a number: an int, a ``signal.Signals``, or a name ("TERM", "SIGUSR1")."""
    if sig is None:
        return 0
    if isinstance(sig, int) and not isinstance(sig, bool):
        if 0 < sig < _signal.NSIG:
            return int(sig)
    elif isinstance(sig, str):
        name = sig.strip().upper()
        if name.isdigit():
            return parse_signal(int(name))
        if not name.startswith("SIG"):
            name = "SIG" + name
        member = getattr(_signal.Signals, name, None)
        if member is not None:
            return int(member)
    raise errors.InvalidArgument(
        "signal %r is not a signal; use a name such as TERM, INT, USR1 or a number" % (sig,)
    )
