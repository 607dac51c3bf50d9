"""Automatic heartbeats for a Python rank that never imports ltworker.

Started by ltd's sitecustomize in the first Python process of a rank (see
there). It writes lines of the heartbeat protocol (docs/user-guide.md,
"Automatic heartbeats") through ltworker's own writer, loaded privately from ltd's
copy so that the program's `import ltworker`, if any, is untouched:

    auto on                 this rank is watched automatically
    auto step N             N optimizer steps done so far
    auto live               the main thread made progress since the last check
    auto stack F1<TAB>F2..  the main thread stopped here (innermost frame
                            first, each `File "f.py", line 3 in fn`)
    auto stacksig N         `ltctl stack` may send signal N (see below)

The rank is watched from the moment `torch` has been imported (`auto on`):
loading torch's native library holds the GIL for seconds, which no thread
of Python can see through, and a Python that never imports torch has no
training loop to watch. Until then only uncaught exceptions are reported.
While the main thread waits in torch.distributed's rendezvous for its
peers, nothing is reported: ltd counts a rank that has reported nothing
since `auto on` as still starting, which is no evidence of a hang (start-up
has its own deadline).

A check that ran late (this thread was not scheduled: a busy machine) is
no evidence either way: it sends `auto late`, never a stack.

Progress is judged by a daemon thread, never by the training loop, which
only pays for counting its optimizer steps (one Python call per step):

- steps: torch's global optimizer step post-hook (torch >= 2.0), or the
  per-step `Optimizer._optimizer_step_code` entry point the profiler uses
  (torch 1.13); hooked when `torch.optim.optimizer` is imported, so a
  program that never imports torch pays nothing for it;
- the main thread's stack: sampled `_SAMPLES` times per interval through
  sys._current_frames(); it made progress when its innermost frames (code
  and instruction) changed between two samples. A main thread blocked in
  one call (a sleep, a collective, a lock) shows the same frame every time.

Each interval with progress sends `auto live` (and `auto step N` when the
count moved); the first interval without sends the stack once, so ltd has
it for its hang report without signalling the rank.

`ltctl stack` asks a running rank for every thread's frames without
stopping it: ltd passes each rank a pipe only its supervisor reads
(LT_STACK_FD), and this module registers faulthandler on a real-time
signal that nothing of the program handles, writing to that pipe. The
dump runs in C inside the signal handler, so a main thread that holds the
GIL in a collective answers too, and the program goes on. Should the
program set a handler of its own on that signal later, its handler wins
and `ltctl stack` says that no frames came.

Only this process reports: a forked child (DataLoader workers) switches it
off (os.register_at_fork), and children started anew inherit
LT_AUTO_HEARTBEAT=used, which the sitecustomize never activates.
"""

import importlib.util
import os
import sys
import threading
import time

_SAMPLES = 4  # stack samples per interval
_MAX_FRAMES = 40
_MAX_STACK_BYTES = 4000  # the line stays below ltd's 4096

_active = False
_steps = 0
_send = None  # ltworker's _send(bytes) -> bool
_report_error = None


def _load_ltworker():
    """ltd's own ltworker, under a private name."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(os.path.dirname(here), "ltworker", "__init__.py")
    spec = importlib.util.spec_from_file_location("_ltd_ltworker", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- optimizer steps ---------------------------------------------------------


def _count_step(*_args, **_kwargs):
    global _steps
    _steps += 1


def _hook_optimizer(module):
    """Counts every optimizer step once torch.optim.optimizer is loaded."""
    register = getattr(module, "register_optimizer_step_post_hook", None)
    if register is not None:  # torch >= 2.0
        register(_count_step)
        return True
    optimizer = getattr(module, "Optimizer", None)
    if optimizer is not None and hasattr(optimizer, "_optimizer_step_code"):
        # torch 1.13: the profiling wrapper around every optimizer class's
        # step calls this empty method once per step.
        optimizer._optimizer_step_code = _count_step
        return True
    return False


class _LoaderProxy:
    """Runs the real loader, then hooks the optimizer module."""

    def __init__(self, loader, on_loaded):
        self._loader = loader
        self._on_loaded = on_loaded

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            self._on_loaded(module)
        except Exception:
            pass

    def __getattr__(self, name):  # get_source, get_filename, ... for tracebacks
        return getattr(self._loader, name)


class _ModuleFinder:
    """A meta path finder that only watches for a few modules and runs a
    callback once each is loaded; it leaves once they all are."""

    def __init__(self, callbacks):
        self.callbacks = dict(callbacks)  # module name -> f(module)

    def find_spec(self, name, path, target=None):
        on_loaded = self.callbacks.pop(name, None)
        if on_loaded is None:
            return None
        if not self.callbacks:
            try:
                sys.meta_path.remove(self)
            except ValueError:
                pass
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if find is None or finder is self:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _LoaderProxy(spec.loader, on_loaded)
        return spec


def _when_loaded(callbacks):
    waiting = {}
    for name, on_loaded in callbacks.items():
        module = sys.modules.get(name)
        if module is not None:
            on_loaded(module)
        else:
            waiting[name] = on_loaded
    if waiting:
        sys.meta_path.insert(0, _ModuleFinder(waiting))


# --- the main thread's progress ----------------------------------------------


def _signature(frame):
    """What changes whenever the main thread runs Python code."""
    if frame is None:
        return None
    back = frame.f_back
    return (id(frame), frame.f_code, frame.f_lasti,
            None if back is None else (id(back), back.f_lasti))


_CONTROL_TO_SPACE = {c: " " for c in list(range(0x20)) + [0x7F]}


def format_stack(frame):
    """The protocol's stack text: innermost frame first, tab-separated,
    printable ASCII only, at most _MAX_STACK_BYTES (the innermost frames and
    the outermost, which tells the main thread apart)."""
    frames = []
    while frame is not None:
        code = frame.f_code
        text = 'File "%s", line %d in %s' % (code.co_filename, frame.f_lineno or 0, code.co_name)
        frames.append(text.translate(_CONTROL_TO_SPACE).encode("ascii", "backslashreplace"))
        frame = frame.f_back
    if len(frames) > _MAX_FRAMES:
        frames = frames[: _MAX_FRAMES - 1] + frames[-1:]
    while len(frames) > 1 and sum(len(f) + 1 for f in frames) > _MAX_STACK_BYTES:
        del frames[-2 if len(frames) > 2 else -1]
    out = b"\t".join(frames)
    return out[:_MAX_STACK_BYTES]


def _program_beats_itself():
    """True once the program's own `ltworker` sent a heartbeat or timeout
    (ltd ignores this module's lines from then on anyway). libltworker's
    beats are not seen here; ltd's precedence covers them."""
    ltworker = sys.modules.get("ltworker")
    return ltworker is not None and getattr(ltworker, "_own_beats_sent", False)


# Frames of a rank that waits for its peers to join the job: it is still
# starting, not hung (start-up has its own deadline, --startup-timeout).
_RENDEZVOUS_FUNCTIONS = frozenset(("init_process_group", "_store_based_barrier",
                                   "rendezvous", "_create_c10d_store", "init_device_mesh"))


def in_rendezvous(frame):
    """True when the main thread waits in torch.distributed's rendezvous."""
    while frame is not None:
        code = frame.f_code
        filename = code.co_filename.replace("\\", "/")
        if code.co_name in _RENDEZVOUS_FUNCTIONS and "torch/distributed/" in filename:
            return True
        if "torch/distributed/rendezvous.py" in filename:
            return True
        frame = frame.f_back
    return False


class _Watcher:
    """Judges the main thread's progress, one interval at a time.

    Its clock, sleep, frames and line writer are injected, so that its
    logic is tested without threads or time (tests/test_autoheartbeat.py).
    It reports nothing until the main thread is past torch.distributed's
    rendezvous (a rank waiting there for a slower peer is starting, not
    hung: ltd counts a rank that said `auto on` but reported nothing yet as
    starting), and treats its own late checks as no evidence: a sample that
    came much later than asked for means this thread was not scheduled
    (a busy machine), so the main thread may not have been either. Such an
    interval sends `auto late` instead of a verdict of no progress.
    """

    # A sample later than this past its time was not scheduled.
    LATE_SLACK = 0.05

    def __init__(self, interval, main_ident, clock=time.monotonic, sleep=time.sleep,
                 frames=sys._current_frames, send=None, steps=None):
        self.interval = interval
        self.main_ident = main_ident
        self.clock = clock
        self.sleep = sleep
        self.frames = frames
        self.send = send if send is not None else (lambda line: _send(line))
        self.steps = steps if steps is not None else (lambda: _steps)
        self.sent_steps = 0  # no step line before the first step
        self.stack_sent = False
        self.reporting = False  # past the rendezvous: reports every interval
        self.last = None

    def main_frame(self):
        return self.frames().get(self.main_ident)

    def run(self):
        self.last = _signature(self.main_frame())
        while _active:
            if not self.check():
                return
            if _program_beats_itself():
                return  # ltd now watches this rank by the program's own beats

    def check(self):
        """One interval: samples, then reports. False once the main thread
        is gone (the interpreter exits) or the module was switched off."""
        moved = False
        late = False
        pause = self.interval / _SAMPLES
        for _ in range(_SAMPLES):
            asked = self.clock()
            self.sleep(pause)
            if self.clock() - asked > 2 * pause + self.LATE_SLACK:
                late = True
            frame = self.main_frame()
            if frame is None:
                return False
            now = _signature(frame)
            if now != self.last:
                moved = True
                self.last = now
            del frame
        if not _active:
            return False
        if not self.reporting:
            frame = self.main_frame()
            if frame is None:
                return False
            starting = in_rendezvous(frame)
            del frame
            if starting:
                return True  # nothing reported: ltd counts it as starting
            self.reporting = True
        self.report(moved, late)
        return True

    def report(self, moved, late=False):
        steps = self.steps()
        if steps != self.sent_steps:
            self.send(b"auto step %d\n" % steps)
            self.sent_steps = steps
            moved = True
        if moved:
            self.send(b"auto live\n")
            self.stack_sent = False
        elif late:
            self.send(b"auto late\n")
        elif not self.stack_sent:
            frame = self.main_frame()
            if frame is not None:
                self.send(b"auto stack " + format_stack(frame) + b"\n")
            del frame
            self.stack_sent = True


# --- errors ------------------------------------------------------------------


def describe_exception(exc_type, exc, tb):
    """`Type: message (file:line in function)`, where it was raised."""
    text = "%s: %s" % (getattr(exc_type, "__name__", "exception"), exc)
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None:
        code = tb.tb_frame.f_code
        text += " (%s:%d in %s)" % (os.path.basename(code.co_filename), tb.tb_lineno,
                                    code.co_name)
    return text


def _install_excepthooks():
    previous = sys.excepthook

    def excepthook(exc_type, exc, tb):
        if _active:
            try:
                _report_error(describe_exception(exc_type, exc, tb))
            except Exception:
                pass
        previous(exc_type, exc, tb)

    sys.excepthook = excepthook
    previous_thread = threading.excepthook

    def thread_excepthook(args):
        if _active and args.exc_type is not SystemExit:
            try:
                name = args.thread.name if args.thread is not None else "?"
                _report_error("in thread %s: %s" % (
                    name, describe_exception(args.exc_type, args.exc_value, args.exc_traceback)))
            except Exception:
                pass
        previous_thread(args)

    threading.excepthook = thread_excepthook


# --- start -------------------------------------------------------------------


def _off_in_child():
    global _active
    _active = False


def _final_steps():
    if _active and _steps:
        _send(b"auto step %d\n" % _steps)


def _register_stack_dump():
    """faulthandler on a free real-time signal, into LT_STACK_FD; ltd is
    told which signal. Nothing when ltd passed no pipe."""
    value = os.environ.pop("LT_STACK_FD", "")
    if not value.isascii() or not value.isdigit():
        return
    fd = int(value)
    try:
        os.fstat(fd)
        os.set_inheritable(fd, False)  # a subprocess's dump is not this rank's
    except OSError:
        return
    import faulthandler
    import signal

    # Above the ones libraries tend to take (glibc's are below SIGRTMIN).
    for signum in range(signal.SIGRTMIN + 8, signal.SIGRTMAX):
        try:
            if signal.getsignal(signum) != signal.SIG_DFL:
                continue  # the program's, or one Python cannot tell
        except (ValueError, OSError):
            continue
        try:
            faulthandler.register(signum, file=fd, all_threads=True, chain=False)
        except (ValueError, OSError, RuntimeError):
            return
        _send(b"auto stacksig %d\n" % signum)
        return


def start(interval):
    """Activates automatic heartbeats in this process; False when there is
    no heartbeat fd to write to (outside ltd)."""
    global _active, _send, _report_error
    ltworker = _load_ltworker()
    if not ltworker.enabled():
        return False
    _send = ltworker._send
    _report_error = ltworker.report_error
    _active = True
    os.register_at_fork(after_in_child=_off_in_child)
    _install_excepthooks()
    try:
        _register_stack_dump()
    except Exception:  # never break the rank's program
        pass
    main_ident = threading.main_thread().ident

    def watch(_torch):
        if not _active:
            return  # torch imported in a forked child
        _send(b"auto on\n")
        import atexit

        atexit.register(_final_steps)
        watcher = _Watcher(max(0.01, interval), main_ident)
        threading.Thread(target=watcher.run, name="ltd-auto-heartbeat", daemon=True).start()

    _when_loaded({"torch.optim.optimizer": _hook_optimizer, "torch": watch})
    return True
