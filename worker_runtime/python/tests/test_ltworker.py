"""Tests of the ltworker Python module and its Lightning callback logic.

The protocol tests run a child interpreter whose fd 3 is the write end of a
real pipe or socketpair, with LT_HEARTBEAT_FD=3, exactly as under ltd.
Run: /usr/bin/python3 -m unittest discover -s worker_runtime/python/tests
"""

import datetime
import importlib
import os
import select
import socket
import subprocess
import sys
import time
import types
import unittest
import warnings
from unittest import mock

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

import ltworker  # noqa: E402
from ltworker.callback import HeartbeatHooks  # noqa: E402

DEADLINE = 20.0  # seconds; every wait in these tests ends by then


def make_channel(kind):
    """Returns (reader_fd, writer_fd)."""
    if kind == "pipe":
        return os.pipe()
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return a.detach(), b.detach()


def read_until_eof(fd, deadline):
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError("no EOF on the heartbeat channel before the deadline")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        data = os.read(fd, 65536)
        if not data:
            return b"".join(chunks)
        chunks.append(data)


def run_child(code, kind="pipe", env=None, set_fd=True, close_reader=False, read=True):
    """Runs `code` in a child whose fd 3 is the channel's write end.

    Returns (completed process, bytes read from the channel).
    """
    reader, writer = make_channel(kind)
    child_env = {k: v for k, v in os.environ.items()
                 if k not in ("LT_HEARTBEAT_FD", "LT_HEARTBEAT_TIMEOUT")}
    child_env["PYTHONPATH"] = PYTHON_DIR
    if set_fd:
        child_env["LT_HEARTBEAT_FD"] = "3"
    child_env.update(env or {})
    if close_reader:
        os.close(reader)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            env=child_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(3,),
            preexec_fn=lambda: os.dup2(writer, 3),
        )
    finally:
        os.close(writer)
    deadline = time.monotonic() + DEADLINE
    try:
        data = b""
        if not close_reader:
            data = read_until_eof(reader, deadline) if read else b""
        out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        if not close_reader:
            os.close(reader)
    proc.stdout_text = out.decode()
    proc.stderr_text = err.decode()
    return proc, data


class ProtocolTest(unittest.TestCase):
    def check_lines(self, kind):
        code = (
            "import datetime, ltworker\n"
            "assert ltworker.enabled()\n"
            "ok = [ltworker.heartbeat(), ltworker.heartbeat(7), ltworker.set_timeout(0.5),\n"
            "      ltworker.set_timeout(10), ltworker.set_timeout(0),\n"
            "      ltworker.set_timeout(datetime.timedelta(minutes=5)),\n"
            "      ltworker.set_timeout(0.0004),\n"
            "      ltworker.report_error('Traceback:\\n  boom\\r\\n'), ltworker.report_error('')]\n"
            "print(all(ok))\n"
        )
        proc, data = run_child(code, kind)
        self.assertEqual(proc.returncode, 0, proc.stderr_text)
        self.assertEqual(proc.stdout_text.strip(), "True")
        self.assertEqual(
            data,
            b"hb\nhb 7\ntimeout 500ms\ntimeout 10s\ntimeout 0\ntimeout 300s\ntimeout 1ms\n"
            b"error Traceback:   boom  \nerror\n",
        )

    def test_exact_lines_on_pipe(self):
        self.check_lines("pipe")

    def test_exact_lines_on_socket(self):
        self.check_lines("socket")

    def test_disabled_without_environment_variable(self):
        code = (
            "import ltworker\n"
            "print(ltworker.enabled(), ltworker.heartbeat(1), ltworker.set_timeout(3),\n"
            "      ltworker.report_error('x'))\n"
        )
        proc, data = run_child(code, set_fd=False)
        self.assertEqual(proc.returncode, 0, proc.stderr_text)
        self.assertEqual(proc.stdout_text.split(), ["False"] * 4)
        self.assertEqual(data, b"")

    def test_unusable_fd_means_disabled(self):
        for value in ["abc", "-1", "99", "3x", "\u0663"]:
            proc, data = run_child("import ltworker\nprint(ltworker.enabled(), ltworker.heartbeat())",
                                   env={"LT_HEARTBEAT_FD": value})
            self.assertEqual(proc.returncode, 0, proc.stderr_text)
            self.assertEqual(proc.stdout_text.split(), ["False", "False"], value)
            self.assertEqual(data, b"")

    def test_long_and_non_ascii_errors(self):
        code = (
            "import ltworker\n"
            "ltworker.report_error('x' * 100000)\n"
            "ltworker.report_error('caf\\u00e9 \\u2603')\n"
            "ltworker.heartbeat(3)\n"
        )
        proc, data = run_child(code, "socket")
        self.assertEqual(proc.returncode, 0, proc.stderr_text)
        lines = data.split(b"\n")
        self.assertEqual(len(lines[0]) + 1, ltworker.MAX_LINE_BYTES)
        self.assertLess(len(lines[0]) + 1, 4096)
        self.assertTrue(lines[0].startswith(b"error xxx"))
        self.assertTrue(lines[0].endswith(b"x..."))
        self.assertEqual(lines[1:], [b"error caf? ?", b"hb 3", b""])

    def test_closed_reader_is_dropped_silently(self):
        # SIGPIPE at its default action would kill the rank if it reached it.
        code = (
            "import signal, ltworker\n"
            "signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n"
            "print(ltworker.heartbeat(1), ltworker.report_error('x'), ltworker.set_timeout(1))\n"
            "print(signal.SIGPIPE in signal.sigpending(), signal.SIGPIPE in\n"
            "      signal.pthread_sigmask(signal.SIG_BLOCK, []))\n"
        )
        for kind in ("pipe", "socket"):
            proc, _ = run_child(code, kind, close_reader=True)
            self.assertEqual(proc.returncode, 0, kind + ": " + proc.stderr_text)
            self.assertEqual(proc.stdout_text.split(), ["False"] * 5, kind)

    def test_full_channel_does_not_block(self):
        # Nobody reads until the child is done: once the buffer is full,
        # calls return False at once instead of stalling.
        code = (
            "import ltworker\n"
            "text = 'f' * 3000\n"
            "for i in range(1000000):\n"
            "    if not ltworker.report_error(text):\n"
            "        break\n"
            "print(i, all(not ltworker.heartbeat(j) for j in range(100)) or 'short lines fit')\n"
        )
        for kind in ("pipe", "socket"):
            reader, writer = make_channel(kind)
            env = dict(os.environ, PYTHONPATH=PYTHON_DIR, LT_HEARTBEAT_FD="3")
            proc = subprocess.Popen([sys.executable, "-c", code], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    pass_fds=(3,), preexec_fn=lambda w=writer: os.dup2(w, 3))
            os.close(writer)
            try:
                out, err = proc.communicate(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                self.fail(f"{kind}: a heartbeat call blocked on a full channel")
            finally:
                os.close(reader)
            self.assertEqual(proc.returncode, 0, err.decode())
            count = int(out.split()[0])
            self.assertGreater(count, 0)
            self.assertLess(count, 1000000 - 1)

    def test_concurrent_threads_write_whole_lines(self):
        code = (
            "import threading, ltworker\n"
            "def work(t):\n"
            "    for i in range(500):\n"
            "        ltworker.heartbeat(t * 100000 + i)\n"
            "        ltworker.report_error('e' * (100 + t))\n"
            "threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]\n"
            "[t.start() for t in threads]\n"
            "[t.join() for t in threads]\n"
        )
        proc, data = run_child(code, "socket")
        self.assertEqual(proc.returncode, 0, proc.stderr_text)
        lines = data.split(b"\n")
        self.assertEqual(lines[-1], b"")
        for line in lines[:-1]:
            ok = (line.startswith(b"hb ") and line[3:].isdigit()) or (
                line.startswith(b"error ") and set(line[6:]) == {ord("e")}
                and 100 <= len(line) - 6 < 108)
            self.assertTrue(ok, line[:40])

    def test_import_does_not_import_frameworks(self):
        code = (
            "import sys, ltworker, ltworker.callback\n"
            "print(sorted(m for m in ('lightning', 'pytorch_lightning', 'torch', 'numpy')\n"
            "             if m in sys.modules))\n"
        )
        proc, _ = run_child(code, set_fd=False)
        self.assertEqual(proc.returncode, 0, proc.stderr_text)
        self.assertEqual(proc.stdout_text.strip(), "[]")


class ArgumentTest(unittest.TestCase):
    """Argument checks and formatting, in this process (disabled mode)."""

    def setUp(self):
        patcher = mock.patch.dict(os.environ, {}, clear=False)
        patcher.start()
        self.addCleanup(patcher.stop)
        os.environ.pop("LT_HEARTBEAT_FD", None)
        ltworker._reset_for_testing()
        self.addCleanup(ltworker._reset_for_testing)

    def test_invalid_arguments_raise(self):
        with self.assertRaises(ValueError):
            ltworker.heartbeat(-1)
        with self.assertRaises(TypeError):
            ltworker.heartbeat(1.5)
        with self.assertRaises(ValueError):
            ltworker.set_timeout(-1)
        with self.assertRaises(ValueError):
            ltworker.set_timeout(float("nan"))
        with self.assertRaises(TypeError):
            ltworker.set_timeout("10s")
        with self.assertRaises(TypeError):
            ltworker.set_timeout(True)

    def test_positive_timeout_rounds_up_to_a_millisecond_never_to_off(self):
        ms = ltworker._timeout_ms
        self.assertEqual(ms(0.0004), 1)
        self.assertEqual(ms(1e-12), 1)
        self.assertEqual(ms(5e-324), 1)  # the smallest float: 0 in microseconds
        self.assertEqual(ms(0.001), 1)
        self.assertEqual(ms(0.0015), 2)
        self.assertEqual(ms(0.5), 500)
        self.assertEqual(ms(1.1), 1100)  # not 1101 from 1.1's binary excess
        self.assertEqual(ms(2.675), 2675)
        self.assertEqual(ms(10), 10000)
        self.assertEqual(ms(datetime.timedelta(microseconds=1)), 1)
        self.assertEqual(ms(datetime.timedelta(microseconds=1001)), 2)
        self.assertEqual(ms(datetime.timedelta(minutes=5)), 300000)
        # Only an explicit zero is "off".
        self.assertEqual(ms(0), 0)
        self.assertEqual(ms(0.0), 0)
        self.assertEqual(ms(-0.0), 0)
        self.assertEqual(ms(datetime.timedelta(0)), 0)

    def test_huge_timeout_is_the_longest_ltd_accepts(self):
        ms = ltworker._timeout_ms
        longest = 365 * 24 * 3600 * 1000
        self.assertEqual(ltworker.MAX_TIMEOUT_SECONDS * 1000, longest)
        self.assertEqual(ms(365 * 24 * 3600), longest)
        self.assertEqual(ms(365 * 24 * 3600 - 0.0005), longest)
        self.assertEqual(ms(365 * 24 * 3600 - 0.002), longest - 2)
        for huge in (10 ** 30, 1e300, datetime.timedelta.max):
            self.assertEqual(ms(huge), longest, huge)
        self.assertEqual(ltworker._format_timeout(ms(1e300)), b"timeout 31536000s\n")

    def test_negative_timeout_raises_even_when_tiny(self):
        for bad in (-1, -0.0004, -1e-300, datetime.timedelta(microseconds=-1),
                    float("-inf"), float("inf"), float("nan")):
            with self.assertRaises(ValueError, msg=repr(bad)):
                ltworker.set_timeout(bad)

    def test_timeout_format(self):
        self.assertEqual(ltworker._format_timeout(0), b"timeout 0\n")
        self.assertEqual(ltworker._format_timeout(1), b"timeout 1ms\n")
        self.assertEqual(ltworker._format_timeout(7200000), b"timeout 7200s\n")
        self.assertEqual(ltworker._format_timeout(1500), b"timeout 1500ms\n")

    def test_error_format_at_the_limit(self):
        room = ltworker.MAX_LINE_BYTES - len(b"error \n")
        exact = ltworker._format_error("a" * room)
        self.assertEqual(len(exact), ltworker.MAX_LINE_BYTES)
        self.assertFalse(exact.endswith(b"...\n"))
        cut = ltworker._format_error("a" * (room + 1))
        self.assertEqual(len(cut), ltworker.MAX_LINE_BYTES)
        self.assertTrue(cut.endswith(b"a...\n"))
        self.assertEqual(ltworker._format_error("a\x00b\x7fc\td"), b"error a b c d\n")

    def test_parse_duration(self):
        self.assertEqual(ltworker.parse_duration("500ms"), 0.5)
        self.assertEqual(ltworker.parse_duration("10s"), 10.0)
        self.assertEqual(ltworker.parse_duration("5m"), 300.0)
        self.assertEqual(ltworker.parse_duration("2h"), 7200.0)
        self.assertEqual(ltworker.parse_duration("45"), 45.0)
        self.assertEqual(ltworker.parse_duration("1.5"), 1.5)
        for bad in ["", "s", "10x", "-5s", "1 2"]:
            with self.assertRaises(ValueError):
                ltworker.parse_duration(bad)


class FakeTrainer:
    def __init__(self, global_step=0):
        self.global_step = global_step


class InProcessChannel:
    """LT_HEARTBEAT_FD pointing at a pipe of this process, for the callback tests."""

    def __init__(self, test):
        self.reader, writer = os.pipe()
        test.addCleanup(os.close, self.reader)
        test.addCleanup(os.close, writer)
        patcher = mock.patch.dict(os.environ, {"LT_HEARTBEAT_FD": str(writer)})
        patcher.start()
        test.addCleanup(patcher.stop)
        os.environ.pop("LT_HEARTBEAT_TIMEOUT", None)
        ltworker._reset_for_testing()
        test.addCleanup(ltworker._reset_for_testing)

    def lines(self):
        data = b""
        while select.select([self.reader], [], [], 0)[0]:
            data += os.read(self.reader, 65536)
        return data.decode().splitlines()


class HeartbeatHooksTest(unittest.TestCase):
    def setUp(self):
        self.channel = InProcessChannel(self)
        self.trainer = FakeTrainer()

    def test_train_batches_beat_with_the_global_step(self):
        hooks = HeartbeatHooks(timeout=30)
        for step in (1, 2, 3):
            self.trainer.global_step = step
            hooks.on_train_batch_start(self.trainer, None, batch=None, batch_idx=step - 1)
            hooks.on_train_batch_end(self.trainer, None, None, None, step - 1)
        self.assertEqual(self.channel.lines(), ["hb 1", "hb 2", "hb 3"])

    def lightning_fit(self, hooks, batches):
        """Calls the hooks in the order Lightning 1.9 and 2.x call them in fit."""
        hooks.on_fit_start(self.trainer, None)
        hooks.on_validation_start(self.trainer, None)  # the sanity check
        hooks.on_validation_batch_end(self.trainer, None, None, None, 0)
        hooks.on_validation_end(self.trainer, None)
        hooks.on_train_start(self.trainer, None)
        hooks.on_train_epoch_start(self.trainer, None)
        for i in range(batches):
            hooks.on_train_batch_start(self.trainer, None, None, i)
            self.trainer.global_step += 1
            hooks.on_train_batch_end(self.trainer, None, None, None, i)

    def test_fit_start_arms_the_watchdog_with_the_timeout(self):
        # Without it a job submitted without --heartbeat-timeout never hangs.
        hooks = HeartbeatHooks(timeout=60)
        self.lightning_fit(hooks, batches=2)
        self.assertEqual(self.channel.lines(),
                         ["timeout 60s", "hb", "hb", "hb", "hb", "hb", "hb", "hb 1", "hb 2"])

    def test_the_timeout_goes_out_before_any_beat_and_only_once_per_fit(self):
        hooks = HeartbeatHooks(timeout=1.5)
        hooks.on_fit_start(self.trainer, None)
        hooks.on_train_start(self.trainer, None)
        self.assertEqual(self.channel.lines(), ["timeout 1500ms", "hb", "hb"])
        hooks.on_fit_start(self.trainer, None)  # a second fit arms again
        self.assertEqual(self.channel.lines(), ["timeout 1500ms", "hb"])

    def test_train_start_arms_if_fit_start_did_not(self):
        hooks = HeartbeatHooks(timeout=60)
        hooks.on_train_start(self.trainer, None)
        hooks.on_train_epoch_start(self.trainer, None)
        self.assertEqual(self.channel.lines(), ["timeout 60s", "hb", "hb"])

    def test_timeout_from_the_environment_is_armed_too(self):
        with mock.patch.dict(os.environ, {"LT_HEARTBEAT_TIMEOUT": "45s"}):
            hooks = HeartbeatHooks()
        hooks.on_fit_start(self.trainer, None)
        self.assertEqual(self.channel.lines(), ["timeout 45s", "hb"])

    def test_unknown_timeout_arms_nothing(self):
        hooks = HeartbeatHooks()
        self.lightning_fit(hooks, batches=1)
        self.assertNotIn("timeout", " ".join(self.channel.lines()))

    def test_explicit_zero_turns_the_watchdog_off_at_fit_start(self):
        hooks = HeartbeatHooks(timeout=0)
        hooks.on_fit_start(self.trainer, None)
        self.assertEqual(self.channel.lines(), ["timeout 0", "hb"])

    def test_sub_millisecond_timeouts_round_up_never_to_off(self):
        hooks = HeartbeatHooks(timeout=0.0004, checkpoint_timeout=0.0001)
        hooks.on_fit_start(self.trainer, None)
        hooks.on_save_checkpoint(self.trainer, None, {})
        hooks.on_train_batch_start(self.trainer, None, None, 0)
        self.assertEqual(self.channel.lines(),
                         ["timeout 1ms", "hb", "timeout 1ms", "hb", "timeout 1ms"])

    def test_invalid_timeouts_raise_at_construction(self):
        for bad in (-1, -0.0004, float("nan"), float("inf")):
            with self.assertRaises(ValueError, msg=repr(bad)):
                HeartbeatHooks(timeout=bad)
            with self.assertRaises(ValueError, msg=repr(bad)):
                HeartbeatHooks(timeout=30, checkpoint_timeout=bad)
        with self.assertRaises(TypeError):
            HeartbeatHooks(timeout="60s")

    def test_the_programs_own_beat_is_known_before_it_goes_out(self):
        # ltd's automatic heartbeat module stops once it sees this flag; seen
        # only after the line, its thread could send another interval's line
        # after the program's beat (it did on a busy CI machine).
        seen = []
        real_send = ltworker._send
        for beat in (lambda: ltworker.heartbeat(), lambda: ltworker.heartbeat(3),
                     lambda: ltworker.set_timeout(5)):
            ltworker._reset_for_testing()

            def send(line):
                seen.append((line, ltworker._own_beats_sent))
                return real_send(line)

            with mock.patch.object(ltworker, "_send", send):
                self.assertTrue(beat())
        self.assertEqual(seen, [(b"hb\n", True), (b"hb 3\n", True), (b"timeout 5s\n", True)])
        self.assertEqual(self.channel.lines(), ["hb", "hb 3", "timeout 5s"])

    def test_validation_and_loop_hooks_beat_without_a_step(self):
        hooks = HeartbeatHooks(timeout=30)
        self.trainer.global_step = 9
        hooks.on_validation_start(self.trainer, None)
        hooks.on_validation_batch_end(self.trainer, None, None, None, 0)
        hooks.on_validation_batch_end(self.trainer, None, None, None, 1, dataloader_idx=1)
        hooks.on_validation_end(self.trainer, None)
        hooks.on_train_epoch_end(self.trainer, None)
        self.assertEqual(self.channel.lines(), ["hb"] * 5)

    def test_checkpoint_widens_then_restores_the_timeout(self):
        hooks = HeartbeatHooks(timeout=45, checkpoint_timeout=900)
        self.trainer.global_step = 10
        hooks.on_train_batch_end(self.trainer, None, None, None, 9)
        hooks.on_save_checkpoint(self.trainer, None, {})
        # The save happens here; the next hook restores the job's timeout.
        hooks.on_train_batch_start(self.trainer, None, None, 10)
        self.trainer.global_step = 11
        hooks.on_train_batch_end(self.trainer, None, None, None, 10)
        hooks.on_train_batch_end(self.trainer, None, None, None, 11)
        self.assertEqual(self.channel.lines(),
                         ["hb 10", "timeout 900s", "hb", "timeout 45s", "hb 11", "hb 11"])

    def test_normal_timeout_defaults_to_the_environment(self):
        with mock.patch.dict(os.environ, {"LT_HEARTBEAT_TIMEOUT": "1500ms"}):
            hooks = HeartbeatHooks()
        self.assertEqual(hooks.timeout, 1.5)
        hooks.on_save_checkpoint(self.trainer, None, {})
        hooks.on_validation_end(self.trainer, None)
        self.assertEqual(self.channel.lines(), ["timeout 600s", "hb", "timeout 1500ms", "hb"])

    def test_unknown_timeout_keeps_the_widened_one_and_warns_once(self):
        hooks = HeartbeatHooks(checkpoint_timeout=120)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            hooks.on_save_checkpoint(self.trainer, None, {})
            hooks.on_train_batch_end(self.trainer, None, None, None, 0)
            hooks.on_save_checkpoint(self.trainer, None, {})
        self.assertEqual(len(caught), 1)
        self.assertEqual(self.channel.lines(), ["timeout 120s", "hb", "hb 0", "timeout 120s", "hb"])

    def test_exception_is_reported(self):
        hooks = HeartbeatHooks(timeout=30)
        hooks.on_exception(self.trainer, None, RuntimeError("CUDA error: device-side assert\nat x"))
        hooks.on_exception(self.trainer, None, KeyboardInterrupt())
        self.assertEqual(self.channel.lines(),
                         ["error RuntimeError: CUDA error: device-side assert at x",
                          "error KeyboardInterrupt"])

    def test_disabled_hooks_are_no_ops(self):
        os.environ.pop("LT_HEARTBEAT_FD")
        ltworker._reset_for_testing()
        hooks = HeartbeatHooks(timeout=30)
        hooks.on_train_batch_end(self.trainer, None, None, None, 0)
        hooks.on_save_checkpoint(self.trainer, None, {})
        hooks.on_exception(self.trainer, None, ValueError("x"))
        self.assertEqual(self.channel.lines(), [])


class LightningModuleTest(unittest.TestCase):
    """ltworker.lightning against stand-in Lightning packages."""

    def import_with(self, modules):
        fake = {name: None for name in ("lightning", "lightning.pytorch", "pytorch_lightning")}
        fake.update(modules)
        with mock.patch.dict(sys.modules, fake):
            sys.modules.pop("ltworker.lightning", None)
            try:
                return importlib.import_module("ltworker.lightning")
            finally:
                sys.modules.pop("ltworker.lightning", None)

    @staticmethod
    def fake_package(name):
        class Callback:
            def __init__(self):
                self.base_initialized = True

            def on_train_batch_end(self, *args):
                raise AssertionError("the base hook must be overridden")

        module = types.ModuleType(name)
        module.Callback = Callback
        return module

    def test_prefers_lightning_pytorch(self):
        pkg = self.fake_package("lightning.pytorch")
        module = self.import_with({"lightning": types.ModuleType("lightning"),
                                   "lightning.pytorch": pkg})
        callback = module.LtdHeartbeat(timeout=10, checkpoint_timeout=20)
        self.assertIsInstance(callback, pkg.Callback)
        self.assertIsInstance(callback, HeartbeatHooks)
        self.assertTrue(callback.base_initialized)
        self.assertEqual((callback.timeout, callback.checkpoint_timeout), (10, 20))

    def test_falls_back_to_pytorch_lightning(self):
        pkg = self.fake_package("pytorch_lightning")
        module = self.import_with({"pytorch_lightning": pkg})
        channel = InProcessChannel(self)
        callback = module.LtdHeartbeat(timeout=10)
        self.assertIsInstance(callback, pkg.Callback)
        callback.on_train_batch_end(FakeTrainer(4), None, None, None, 3)
        self.assertEqual(channel.lines(), ["hb 4"])

    def test_without_lightning_the_import_error_says_what_to_do(self):
        with self.assertRaisesRegex(ImportError, "pip install lightning"):
            self.import_with({})


if __name__ == "__main__":
    unittest.main()
