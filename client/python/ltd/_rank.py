"""One rank of ``ltd.launch``: ``python -m ltd._rank WORKDIR``, in a fresh interpreter.

Reads the launcher's ``meta.json`` (the launcher's ``sys.path``, its
notebook cells) and ``payload.pkl`` (the function and its arguments, by
cloudpickle), runs the function, and writes its pickled return value to
``result.RANK.pkl`` (rank 0's, or every rank's for ``return_all``). An
exception becomes this rank's ``error TEXT`` line on the heartbeat fd
(``ValueError: bad batch (cell 4, line 3)``), which ltd makes the root
cause's message, and its traceback goes to stderr; the rank exits 1.
"""

import json
import linecache
import os
import sys
import traceback

# One heartbeat line stays below PIPE_BUF (ltworker.MAX_LINE_BYTES).
_MAX_LINE = 4095


def _report_error(text):
    fd = os.environ.get("LT_HEARTBEAT_FD")
    if not fd:
        return
    data = " ".join(text.split()).encode("utf-8", "backslashreplace")
    room = _MAX_LINE - len(b"error \n")
    if len(data) > room:
        data = data[: room - 3] + b"..."
    try:
        os.write(int(fd), b"error " + data + b"\n")
    except (OSError, ValueError):
        pass  # no fd 3 (run by hand): the traceback on stderr says it


def _where(tb, cells):
    """Where an exception was raised: the innermost frame in a notebook cell, else the innermost."""
    frames = traceback.extract_tb(tb)
    for f in reversed(frames):
        if f.filename in cells:
            return "cell %s, line %d" % (cells[f.filename], f.lineno)
    if frames:
        f = frames[-1]
        return "%s:%d in %s" % (os.path.basename(f.filename), f.lineno, f.name)
    return ""


def _describe(exc, tb, cells):
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    where = _where(tb, cells)
    return "%s (%s)" % (text, where) if where else text


def _write_result(workdir, rank, value):
    import cloudpickle

    data = cloudpickle.dumps(value)
    tmp = os.path.join(workdir, ".result.%d.pkl" % rank)
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, os.path.join(workdir, "result.%d.pkl" % rank))


def main():
    if len(sys.argv) != 2:
        print("usage: python -m ltd._rank WORKDIR (ltd.launch runs this)", file=sys.stderr)
        return 2
    workdir = sys.argv[1]
    rank = int(os.environ.get("RANK", "0"))
    with open(os.path.join(workdir, "meta.json")) as f:
        meta = json.load(f)
    # Modules the function refers to by name import as in the launcher.
    for p in meta.get("sys_path", []):
        if p not in sys.path:
            sys.path.append(p)
    cells = {}
    for filename, cell in meta.get("cells", {}).items():
        cells[filename] = cell["number"]
        lines = cell["source"].splitlines(True)
        linecache.cache[filename] = (len(cell["source"]), None, lines, filename)
    try:
        import cloudpickle

        with open(os.path.join(workdir, "payload.pkl"), "rb") as f:
            fn, args = cloudpickle.load(f)
    except BaseException as e:  # noqa: B902 - any failure to load is this rank's root cause
        text = "cannot load the launched function: " + _describe(e, e.__traceback__, cells)
        _report_error(text)
        traceback.print_exc()
        return 1
    try:
        value = fn(*args)
    except SystemExit as e:
        if e.code not in (None, 0):
            raise
        value = None
    except BaseException as e:  # noqa: B902
        _report_error(_describe(e, e.__traceback__, cells))
        traceback.print_exc()
        return 1
    if rank == 0 or meta.get("return_all"):
        try:
            _write_result(workdir, rank, value)
        except BaseException as e:  # noqa: B902
            _report_error("cannot pickle rank %d's return value: %s" % (rank, _describe(e, e.__traceback__, cells)))
            traceback.print_exc()
            return 1
    sys.stdout.flush()
    sys.stderr.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
