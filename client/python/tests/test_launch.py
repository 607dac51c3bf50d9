"""ltd.launch from a script, under ltd and under ltrun: values, failures, pickling, Lightning's launcher.

No torch here (the notebook test has the DDP runs): each launch starts two
plain interpreters, about 1 s under either.
"""

import io
import os
import subprocess
import sys
import unittest

import fixture
import ltd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "stand_ins"))


def rank_and_world():
    print("rank %s here" % os.environ["RANK"])
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), os.environ["MASTER_PORT"]


def raise_on_rank_1(text):
    if os.environ["RANK"] == "1":
        raise ValueError(text)
    return "fine"


def explicit_hang():
    # Its own heartbeat, then silence: hung after the job's heartbeat timeout.
    os.write(int(os.environ["LT_HEARTBEAT_FD"]), b"hb 1\n")
    import time

    time.sleep(120)


def print_then_wait(gate):
    import time

    print("waiting for the gate")
    deadline = time.monotonic() + 30
    while not os.path.exists(gate):
        if time.monotonic() > deadline:
            raise TimeoutError("the line never reached the caller while the rank ran")
        time.sleep(0.05)
    return "through"


class GateOpener(io.StringIO):
    """Opens the gate once the rank's line has reached the caller's stdout."""

    def __init__(self, gate):
        super().__init__()
        self.gate = gate

    def write(self, text):
        if "waiting for the gate" in text:
            open(self.gate, "w").close()
        return super().write(text)


def print_numbered(n):
    for i in range(n):
        print("n", i)
    return n


def unpicklable():
    import threading

    return threading.Lock()


def lightning_fit():
    import pytorch_lightning as pl

    trainer = pl.Trainer(devices=2, strategy="ddp", accelerator="cpu")
    return trainer.fit(lambda t: (t.cluster_environment, t.launcher, t.global_rank, t.world_size))


class LaunchBase:
    via = None

    def launch(self, fn, *args, **kw):
        out = io.StringIO()
        kw.setdefault("stdout", out)
        kw.setdefault("stderr", io.StringIO())
        return ltd.launch(fn, *args, via=self.via, socket=self.socket, ltrun=fixture.LTRUN_BIN, grace="1s", **kw), out

    def test_returns_rank_0s_value_or_every_ranks(self):
        value, out = self.launch(rank_and_world, devices=2)
        self.assertEqual(value[:2], (0, 2))
        self.assertIn("[0] rank 0 here", out.getvalue())
        self.assertIn("[1] rank 1 here", out.getvalue())
        values, _ = self.launch(rank_and_world, devices=2, return_all=True)
        self.assertEqual([v[:2] for v in values], [(0, 2), (1, 2)])
        self.assertEqual(values[0][2], values[1][2])  # one MASTER_PORT
        closure = 41
        self.assertEqual(self.launch(lambda: closure + 1, devices=1)[0], 42)  # by value

    def test_output_streams_while_the_ranks_run(self):
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            gate = os.path.join(tmp, "gate")
            out = GateOpener(gate)
            value, _ = self.launch(print_then_wait, gate, stdout=out)
        self.assertEqual(value, "through")
        self.assertIn("[0] waiting for the gate", out.getvalue())

    def test_every_line_of_every_rank_arrives_on_a_busy_machine(self):
        with fixture.CpuHogs():
            value, out = self.launch(print_numbered, 50000, devices=4)
        self.assertEqual(value, 50000)
        self.assertEqual(fixture.every_line_once(out.getvalue().splitlines(), 4, 50000), "")

    def test_an_exception_on_rank_1_raises_job_failed(self):
        with self.assertRaises(ltd.JobFailed) as e:
            self.launch(raise_on_rank_1, "bad batch", devices=2)
        f = e.exception
        self.assertEqual(f.rank, 1)
        self.assertEqual(f.reason, "exited")
        self.assertEqual(f.exit_code, 1)
        self.assertEqual(f.state, "FAILED")
        self.assertTrue(str(f).startswith("rank 1: ValueError: bad batch (test_launch.py:"), str(f))
        self.assertIn("raise_on_rank_1", str(f))
        self.assertTrue(f.job_id)

    def test_a_hang_raises_with_its_hang_report(self):
        with self.assertRaises(ltd.JobFailed) as e:
            self.launch(explicit_hang, devices=2, heartbeat_timeout="1s")
        f = e.exception
        self.assertEqual(f.reason, "hang")
        self.assertEqual(f.exit_code, 124)
        self.assertIsNotNone(f.hang_report)
        self.assertTrue(f.hang_report.stalled_ranks)
        # Both ranks stopped beating at once: no rank is singled out, and
        # the message says so rather than guess.
        self.assertIsNone(f.rank)
        self.assertIn("stopped beating within", str(f))

    def test_what_cannot_be_pickled_says_so(self):
        import threading

        with self.assertRaises(ltd.Error) as e:
            self.launch(len, threading.Lock())
        self.assertIn("cannot pickle the function or its arguments", str(e.exception))
        with self.assertRaises(ltd.JobFailed) as e:
            self.launch(unpicklable)
        self.assertIn("rank 0: cannot pickle rank 0's return value: TypeError", str(e.exception))

    def test_lightning_takes_the_jobs_environment(self):
        values, _ = self.launch(lightning_fit, devices=2, return_all=True)
        self.assertEqual(values, [("TorchElasticEnvironment", None, 0, 2),
                                  ("TorchElasticEnvironment", None, 1, 2)])


@fixture.needs_binaries
class LaunchUnderLtd(LaunchBase, unittest.TestCase):
    via = "ltd"

    @classmethod
    def setUpClass(cls):
        cls.d = fixture.Daemon().start()
        cls.socket = cls.d.socket

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def test_the_job_is_named_after_the_function(self):
        client = ltd.Client(self.socket)
        before = {j.id for j in client.ps(all=True)}
        self.launch(rank_and_world, devices=1)
        made = [j for j in client.ps(all=True) if j.id not in before]
        self.assertEqual([j.name for j in made], ["rank_and_world"])
        self.assertEqual(client.show(made[0].id).label, "launch rank_and_world()")
        ps = subprocess.run([fixture.LTCTL_BIN, "--socket", self.socket, "ps", "-a"],
                            capture_output=True, text=True, check=True).stdout
        self.assertIn("launch rank_and_world()", ps)
        client.close()


@fixture.needs_binaries
class LaunchUnderLtrun(LaunchBase, unittest.TestCase):
    via = "ltrun"
    socket = "/nonexistent/ltd.sock"

    def test_auto_picks_ltrun_without_ltd(self):
        value = ltd.launch(rank_and_world, via="auto", socket=self.socket, ltrun=fixture.LTRUN_BIN,
                           stdout=io.StringIO())
        self.assertEqual(value[:2], (0, 1))


if __name__ == "__main__":
    unittest.main()
