"""ltd's start-up hook for Python ranks (automatic hang detection).

lt-exec puts this directory first on PYTHONPATH of a rank that runs Python
(or a shell that may start it) and sets LT_AUTO_HEARTBEAT to the check
interval in milliseconds. Python's `site` imports the first `sitecustomize`
on sys.path, which is this file. It:

- activates ltd_autoheartbeat in this process if LT_AUTO_HEARTBEAT says so,
  and marks the variable used, so that no process this one starts (a
  subprocess, a multiprocessing spawn) activates again; forked children are
  switched off by ltd_autoheartbeat itself;
- takes this directory off sys.path and off PYTHONPATH, so neither the
  program nor its children see anything of ltd;
- makes stdout and stderr line buffered (a rank's are pipes to its
  supervisor, which Python would block-buffer: a print would reach
  `ltctl attach` only when 8 KiB have piled up), unless the user set
  PYTHONUNBUFFERED, which asks for less buffering still;
- runs the sitecustomize this one shadows (the user's, or the
  distribution's), so it still runs as if ltd were not there.

Nothing here may break the program: an error in the activation is
swallowed, one in the shadowed sitecustomize propagates to `site`, which
reports it as it would without ltd.
"""

import os
import sys


def _ltd_take_our_dir_off(here):
    def ours(entry):
        try:
            return os.path.samefile(entry or os.curdir, here)
        except OSError:
            return False

    sys.path[:] = [p for p in sys.path if not ours(p)]
    value = os.environ.get("PYTHONPATH")
    if value is not None:
        rest = [p for p in value.split(os.pathsep) if not ours(p)]
        if rest:
            os.environ["PYTHONPATH"] = os.pathsep.join(rest)
        else:
            del os.environ["PYTHONPATH"]


def _ltd_activate(here):
    value = os.environ.get("LT_AUTO_HEARTBEAT", "")
    if not value.isascii() or not value.isdigit():
        return  # absent, or "used": another process of this rank has it
    os.environ["LT_AUTO_HEARTBEAT"] = "used"
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location(
            "ltd_autoheartbeat", os.path.join(here, "ltd_autoheartbeat.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules["ltd_autoheartbeat"] = module
        spec.loader.exec_module(module)
        module.start(int(value) / 1000.0)
    except Exception:  # never break the rank's program
        sys.modules.pop("ltd_autoheartbeat", None)


def _ltd_line_buffered():
    if os.environ.get("PYTHONUNBUFFERED"):
        return  # unbuffered already, as the user asked
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True)
        except Exception:  # replaced, closed, or no TextIOWrapper: leave it
            pass


def _ltd_chain():
    # The next sitecustomize on the path (ours is already off it) runs as
    # `sitecustomize`, as `site` would have run it.
    import importlib.machinery
    import importlib.util

    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_ltd_here = os.path.dirname(os.path.abspath(__file__))
_ltd_take_our_dir_off(_ltd_here)
_ltd_activate(_ltd_here)
_ltd_line_buffered()
del _ltd_here
_ltd_chain()
