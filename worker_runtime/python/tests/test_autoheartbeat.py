"""ltd's automatic heartbeat module (autoload/), run as ltd runs it: a fresh
interpreter with the module's directory first on PYTHONPATH,
LT_AUTO_HEARTBEAT set to the check interval and a socket on fd 3."""

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
AUTOLOAD = os.path.join(os.path.dirname(HERE), "autoload")
PYTHON = sys.executable

# A stand-in for torch, whose import starts the watching, for the tests
# that need no real one.
_fake = tempfile.TemporaryDirectory()
FAKE_TORCH = _fake.name
os.mkdir(os.path.join(FAKE_TORCH, "torch"))
open(os.path.join(FAKE_TORCH, "torch", "__init__.py"), "w").close()


def run_rank(code, interval_ms="50", pythonpath=FAKE_TORCH, timeout=120):
    """Runs `code` as an instrumented rank; returns (process, lines sent)."""
    ours, theirs = socket.socketpair()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LT_")}
    env["PYTHONPATH"] = os.pathsep.join([AUTOLOAD] + ([pythonpath] if pythonpath else []))
    env["LT_HEARTBEAT_FD"] = "3"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if interval_ms is not None:
        env["LT_AUTO_HEARTBEAT"] = interval_ms
    fd3 = os.dup(theirs.fileno())
    try:
        # pass_fds keeps the fd number: a trampoline (-S: not instrumented
        # itself) puts it on 3 and execs the rank.
        proc = subprocess.run(
            [PYTHON, "-S", "-c", "import os, sys; os.dup2(int(sys.argv[1]), 3); os.close(int(sys.argv[1]));"
             " os.execv(sys.argv[2], sys.argv[2:])", str(fd3), PYTHON, "-c", textwrap.dedent(code)],
            env=env, pass_fds=(fd3,), capture_output=True, text=True, timeout=timeout)
    finally:
        os.close(fd3)
        theirs.close()
    ours.settimeout(timeout)
    data = b""
    while True:
        chunk = ours.recv(65536)
        if not chunk:
            break
        data += chunk
    ours.close()
    return proc, data.decode("ascii").splitlines()


class AutoHeartbeatTest(unittest.TestCase):
    def test_reports_progress_and_leaves_nothing_to_children(self):
        proc, lines = run_rank("""
            import os, subprocess, sys, time
            import torch
            print("env", os.environ.get("LT_AUTO_HEARTBEAT"), os.environ.get("PYTHONPATH"))
            print("path", any("autoload" in p for p in sys.path))
            child = subprocess.run([sys.executable, "-c",
                "import sys; print('ltd_autoheartbeat' in sys.modules)"],
                capture_output=True, text=True).stdout.strip()
            print("spawned child active", child)
            pid = os.fork()
            if pid == 0:
                os.write(1, b"forked child active %r\\n" % sys.modules["ltd_autoheartbeat"]._active)
                os._exit(0)
            os.waitpid(pid, 0)
            end = time.monotonic() + 0.5
            n = 0
            while time.monotonic() < end:
                n += 1
        """)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("env used %s" % FAKE_TORCH, proc.stdout)
        self.assertIn("path False", proc.stdout)
        self.assertIn("spawned child active False", proc.stdout)
        self.assertIn("forked child active False", proc.stdout)
        self.assertEqual(lines[0], "auto on")
        self.assertEqual(lines.count("auto on"), 1)
        self.assertIn("auto live", lines)
        for line in lines:
            self.assertTrue(line.startswith("auto "), line)

    def test_a_stalled_main_thread_sends_its_stack_once(self):
        proc, lines = run_rank("""
            import time, torch
            def wait_here():
                time.sleep(1.0)
            wait_here()
        """)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        stacks = [l for l in lines if l.startswith("auto stack ")]
        self.assertEqual(len(stacks), 1, lines)
        frames = stacks[0][len("auto stack "):].split("\t")
        self.assertEqual(frames[0], 'File "<string>", line 4 in wait_here')
        self.assertEqual(frames[-1], 'File "<string>", line 5 in <module>')

    def test_nothing_is_watched_before_torch_is_imported(self):
        proc, lines = run_rank("import time; time.sleep(0.5); print('ok')")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(lines, [])

    def test_an_uncaught_exception_is_the_ranks_error(self):
        proc, lines = run_rank("""
            def train():
                raise ValueError("loss is NaN")
            train()
        """)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("ValueError: loss is NaN", proc.stderr)  # the traceback as always
        self.assertIn("error ValueError: loss is NaN (<string>:3 in train)", lines)

    def test_the_users_sitecustomize_still_runs(self):
        with tempfile.TemporaryDirectory() as site:
            with open(os.path.join(site, "sitecustomize.py"), "w") as f:
                f.write("import os\nos.environ['MINE'] = 'ran'\n")
            proc, lines = run_rank(
                "import os, torch; print(os.environ.get('MINE'), os.environ['PYTHONPATH'])",
                pythonpath=os.pathsep.join([site, FAKE_TORCH]))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(), "ran " + os.pathsep.join([site, FAKE_TORCH]))
        self.assertEqual(lines[0], "auto on")

    def test_inactive_without_the_variable_or_once_used(self):
        for value in (None, "used", "x1"):
            proc, lines = run_rank("import sys, torch; print('ltd_autoheartbeat' in sys.modules)",
                                   interval_ms=value)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(proc.stdout.strip(), "False", value)
            self.assertEqual(lines, [], value)

    def test_counts_optimizer_steps(self):
        try:
            import torch  # noqa: F401
        except ImportError:
            self.skipTest("torch is not installed")
        proc, lines = run_rank("""
            import time, torch
            w = torch.zeros(2, requires_grad=True)
            opt = torch.optim.SGD([w], lr=0.1)
            adam = torch.optim.Adam([torch.zeros(2, requires_grad=True)])
            for _ in range(40):
                w.grad = torch.ones(2)
                opt.step()
            adam.step()
            time.sleep(0.3)
        """, interval_ms="50", pythonpath=None)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        steps = [int(l.split()[2]) for l in lines if l.startswith("auto step ")]
        self.assertEqual(steps[-1], 41, lines)

    def test_stops_once_the_program_beats_itself(self):
        ltworker_dir = os.path.dirname(HERE)
        proc, lines = run_rank("""
            import time, torch, ltworker
            end = time.monotonic() + 0.4
            while time.monotonic() < end:
                pass
            ltworker.heartbeat(1)
            sent = time.monotonic()
            while time.monotonic() < sent + 0.4:
                pass
        """, pythonpath=os.pathsep.join([FAKE_TORCH, ltworker_dir]))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("auto live", lines)
        own = lines.index("hb 1")
        # At most the check already under way when the beat went out.
        self.assertLessEqual(len([l for l in lines[own:] if l.startswith("auto ")]), 1, lines)

    def test_counts_steps_through_torch2s_global_post_hook(self):
        # torch >= 2.0's API, in a stand-in: register_optimizer_step_post_hook
        # in torch.optim.optimizer, hooks called as hook(optimizer, args, kwargs).
        with tempfile.TemporaryDirectory() as fake:
            os.makedirs(os.path.join(fake, "torch", "optim"))
            open(os.path.join(fake, "torch", "__init__.py"), "w").close()
            open(os.path.join(fake, "torch", "optim", "__init__.py"), "w").close()
            with open(os.path.join(fake, "torch", "optim", "optimizer.py"), "w") as f:
                f.write(textwrap.dedent("""
                    _hooks = []
                    def register_optimizer_step_post_hook(hook):
                        _hooks.append(hook)
                    class Optimizer:
                        def step(self):
                            for hook in _hooks:
                                hook(self, (), {})
                """))
            proc, lines = run_rank("""
                import time, torch
                from torch.optim.optimizer import Optimizer
                opt = Optimizer()
                for _ in range(7):
                    opt.step()
                time.sleep(0.3)
            """, pythonpath=fake)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("auto step 7", lines)

    def test_stack_lines_stay_short_and_printable(self):
        spec = importlib.util.spec_from_file_location(
            "ltd_autoheartbeat_under_test", os.path.join(AUTOLOAD, "ltd_autoheartbeat.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)

        def deep(n):
            if n == 0:
                return sys._getframe()
            return deep(n - 1)

        text = module.format_stack(deep(500))
        self.assertLess(len(text), 4096 - len("auto stack \n"))
        self.assertTrue(all(0x20 <= b < 0x7F or b == 0x09 for b in text))
        frames = text.split(b"\t")
        self.assertIn(b"in deep", frames[0])
        self.assertIn(b"in deep", frames[-2])  # the innermost ones, then the outermost
        self.assertNotIn(b"in deep", frames[-1])


if __name__ == "__main__":
    unittest.main()


# --- the watcher's judgement, with a fake clock and fake frames ---------------


def _load_module():
    spec = importlib.util.spec_from_file_location(
        "_ltd_autoheartbeat_under_test", os.path.join(AUTOLOAD, "ltd_autoheartbeat.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Code:
    def __init__(self, name, filename):
        self.co_name = name
        self.co_filename = filename


class _Frame:
    def __init__(self, name, filename="train.py", back=None, lasti=0):
        self.f_code = _Code(name, filename)
        self.f_back = back
        self.f_lasti = lasti
        self.f_lineno = 1


class _FakeTime:
    """A clock that moves only when slept on; `starve` makes the next
    sleeps take longer than asked, as a thread that was not scheduled."""

    def __init__(self):
        self.now = 100.0
        self.starve = []  # extra seconds for the next sleeps

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds + (self.starve.pop(0) if self.starve else 0.0)


class WatcherJudgementTest(unittest.TestCase):
    def setUp(self):
        self.m = _load_module()
        self.m._active = True
        self.time = _FakeTime()
        self.sent = []
        self.main = _Frame("<module>")
        self.watcher = self.m._Watcher(
            0.4, 1, clock=self.time.clock, sleep=self.time.sleep,
            frames=lambda: {1: self.main}, send=self.sent.append, steps=lambda: 0)
        self.watcher.last = self.m._signature(self.main)

    def test_a_stalled_main_thread_on_time_sends_its_stack_once(self):
        self.assertTrue(self.watcher.check())
        self.assertTrue(self.watcher.check())
        self.assertTrue(self.watcher.check())
        self.assertEqual(len(self.sent), 1, self.sent)
        self.assertTrue(self.sent[0].startswith(b"auto stack "), self.sent)

    def test_a_late_check_is_no_evidence_not_a_stall(self):
        # One sample came 2s late: the thread was not scheduled, so neither
        # may the main thread have been. No stack, no verdict: `auto late`.
        self.time.starve = [0.0, 2.0]
        self.assertTrue(self.watcher.check())
        self.assertEqual(self.sent, [b"auto late\n"])
        # On time again and still no progress: now that is evidence.
        self.assertTrue(self.watcher.check())
        self.assertEqual(len(self.sent), 2, self.sent)
        self.assertTrue(self.sent[1].startswith(b"auto stack "), self.sent)

    def test_a_late_check_that_saw_progress_is_progress(self):
        self.time.starve = [1.0]
        self.main = _Frame("step", back=_Frame("<module>"))
        self.watcher.check()
        self.assertEqual(self.sent, [b"auto live\n"])

    def test_a_rank_waiting_in_the_rendezvous_reports_nothing(self):
        self.main = _Frame(
            "_store_based_barrier", "/usr/lib/python3/torch/distributed/distributed_c10d.py",
            back=_Frame("init_process_group",
                        "/usr/lib/python3/torch/distributed/distributed_c10d.py",
                        back=_Frame("<module>")))
        self.watcher.last = self.m._signature(self.main)
        for _ in range(20):  # 8s in the rendezvous, for a slower peer
            self.assertTrue(self.watcher.check())
        self.assertEqual(self.sent, [])
        self.main = _Frame("train", back=_Frame("<module>"))
        self.watcher.check()
        self.assertEqual(self.sent, [b"auto live\n"])

    def test_rendezvous_frames_are_torchs_own(self):
        self.assertFalse(self.m.in_rendezvous(_Frame("rendezvous", "my_launcher.py")))
        self.assertTrue(self.m.in_rendezvous(
            _Frame("f", "/x/torch/distributed/rendezvous.py", back=_Frame("<module>"))))
