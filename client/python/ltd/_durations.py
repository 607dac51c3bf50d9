"""Durations as ltctl takes them: a number of seconds, a timedelta, or a text:
"500ms", "10s", "1h30m", "1d", plain seconds, or Slurm's "MM:SS", "HH:MM:SS",
"D-HH", "D-HH:MM", "D-HH:MM:SS" (common/duration.h has the same rules)."""

import datetime
import re

_UNITS = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
# Each unit at most once, from the largest down ("1h30m", not "30m1h").
_SUM = re.compile(
    r"^(?:(%s)d)?(?:(%s)h)?(?:(%s)m(?!s))?(?:(%s)s)?(?:(%s)ms)?$" % ((_NUMBER,) * 5)
)
_PLAIN = re.compile(r"^%s$" % _NUMBER)
_CLOCK = re.compile(r"^(?:(\d{1,9})-)?(\d{1,9})(?::(\d{1,9}))?(?::(\d{1,9}))?$")
_MAX_MS = 365 * 86_400_000
_HINT = "use e.g. 500ms, 10s, 1h30m, 01:30:00 or plain seconds"
_TIME_HINT = "use e.g. 2h, 1h30m, 90 (minutes), 01:30:00 or 1-12:00:00"


def _clock_ms(m):
    days, first, second, third = m.groups()
    fields = [int(f) for f in (first, second, third) if f is not None]
    if any(f > 59 for f in fields[1:]):
        return None
    if days is not None:
        if fields[0] > 23:
            return None
        hh, mm, ss = (fields + [0, 0])[:3]
        return ((int(days) * 24 + hh) * 60 + mm) * 60_000 + ss * 1000
    if len(fields) == 2:
        return (fields[0] * 60 + fields[1]) * 1000
    if len(fields) == 3:
        return ((fields[0] * 60 + fields[1]) * 60 + fields[2]) * 1000
    return None


def parse_text(text, bare_ms=1000):
    """Milliseconds of a duration text, or None; ``bare_ms``: what a plain number counts."""
    if not text:
        return None
    ms = None
    if ":" in text or "-" in text:
        m = _CLOCK.match(text)
        ms = _clock_ms(m) if m else None
    elif _PLAIN.match(text):
        ms = round(float(text) * bare_ms)
    else:
        m = _SUM.match(text)
        if m and any(g is not None for g in m.groups()):
            ms = round(sum(float(g) * u for g, u in zip(m.groups(), _UNITS.values()) if g is not None))
    if ms is None or ms > _MAX_MS:
        return None
    return int(ms)


def to_ms(value, what, bare_ms=1000):
    """Milliseconds of ``value``; 0 for None. Raises ValueError with a one-line hint.

    ``bare_ms``: what a plain number in a text counts (60000 for ``--time``,
    whose "90" is 90 minutes as sbatch's); a Python number is always seconds.
    """
    if value is None:
        return 0
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        ms = parse_text(value.strip(), bare_ms)
        if ms is None:
            hint = _TIME_HINT if bare_ms == 60_000 else _HINT
            raise ValueError("%s %r is not a duration; %s" % (what, value, hint))
        return ms
    else:
        raise ValueError("%s must be seconds, a timedelta or a text such as '10s'" % what)
    if seconds < 0:
        raise ValueError("%s must not be negative" % what)
    return int(round(seconds * 1000))


def to_text(value, what):
    """The duration as ltrun's flags take it ("1500ms")."""
    return "%dms" % to_ms(value, what)
