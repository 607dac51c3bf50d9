"""Durations as ltctl takes them: a number of seconds, a timedelta, or "500ms", "10s", "5m", "2h"."""

import datetime
import re

_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "": 1000}
_TEXT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|)\s*$")


def to_ms(value, what):
    """Milliseconds of ``value``; 0 for None. Raises ValueError with a one-line hint."""
    if value is None:
        return 0
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        m = _TEXT.match(value)
        if not m:
            raise ValueError(
                "%s %r is not a duration; use e.g. 500ms, 10s, 5m, 2h or plain seconds" % (what, value)
            )
        return int(round(float(m.group(1)) * _UNITS[m.group(2)]))
    else:
        raise ValueError("%s must be seconds, a timedelta or a text such as '10s'" % what)
    if seconds < 0:
        raise ValueError("%s must not be negative" % what)
    return int(round(seconds * 1000))


def to_text(value, what):
    """The duration as ltrun's flags take it ("1500ms")."""
    return "%dms" % to_ms(value, what)
