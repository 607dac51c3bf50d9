"""ltd.launch from real Jupyter kernels (Debian's ipykernel), under ltd and under ltrun.

- nbclient runs a notebook that makes a tensor in the kernel, launches a
  gloo DDP training function defined in a cell on 2 ranks and gets rank
  0's value; a function raising on rank 1 gives ltd.JobFailed naming rank
  1, the exception and its cell; a rank that hangs gives a hang report.
- jupyter_client: an interrupt mid-launch, a shutdown and a kill of the
  kernel mid-launch each leave no process of the job.

Cost: the notebook starts 3 jobs of 2 torch ranks (~15 s on 2 cores, most
of it importing torch and the 5 s hang timeout); the kernel cases 3 kernels
of plain ranks (~3 s each). Both once per transport.
"""

import os
import shutil
import signal
import tempfile
import textwrap
import time
import unittest

import fixture

HAVE_JUPYTER = all(fixture.have_module(m) for m in ("nbclient", "nbformat", "jupyter_client", "ipykernel"))
HAVE_TORCH = fixture.have_module("torch")
GRACE = 2.0


def _setup(via, socket):
    return "VIA, SOCKET, LTRUN = %r, %r, %r" % (via, socket, fixture.LTRUN_BIN)


NOTEBOOK_CELLS = [
    # cell 1
    """\
import os, torch, ltd
kernel_tensor = torch.ones(4) * 2   # torch initialised in the kernel: the ranks are fresh interpreters
{setup}""",
    # cell 2
    """\
def train(steps):
    import os, torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.ones(8, 4) * (dist.get_rank() + 1), torch.zeros(8, 1)
    for _ in range(steps):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
    print("rank", dist.get_rank(), "loss", round(float(loss), 4))
    weights = float(sum(p.detach().sum() for p in model.parameters()))
    dist.destroy_process_group()
    return {"rank": dist.get_rank() if dist.is_initialized() else int(os.environ["RANK"]),
            "world": int(os.environ["WORLD_SIZE"]), "weights": weights}""",
    # cell 3
    """\
result = ltd.launch(train, 3, devices=2, via=VIA, socket=SOCKET, ltrun=LTRUN)
assert result["rank"] == 0 and result["world"] == 2, result
assert float(kernel_tensor.sum()) == 8.0
result""",
    # cell 4
    """\
def bad_batch():
    import os
    if os.environ["RANK"] == "1":
        raise ValueError("bad batch")
    return 0""",
    # cell 5
    """\
try:
    ltd.launch(bad_batch, devices=2, via=VIA, socket=SOCKET, ltrun=LTRUN, grace="1s")
    raise AssertionError("no JobFailed")
except ltd.JobFailed as e:
    failed = e
assert failed.rank == 1 and failed.reason == "exited" and failed.exit_code == 1, vars(failed)
assert str(failed).startswith("rank 1: ValueError: bad batch (cell 4, line 4)"), str(failed)""",
    # cell 6
    """\
def stuck():
    import time, torch.distributed as dist
    dist.init_process_group("gloo")
    if dist.get_rank() == 1:
        time.sleep(600)   # hangs outside any collective; rank 0 waits in the barrier
    dist.barrier()""",
    # cell 7
    """\
try:
    ltd.launch(stuck, devices=2, via=VIA, socket=SOCKET, ltrun=LTRUN, heartbeat_timeout="5s", grace="1s")
    raise AssertionError("no JobFailed")
except ltd.JobFailed as e:
    hung = e
assert hung.reason == "hang" and hung.exit_code == 124, (str(hung), vars(hung))
assert hung.hang_report is not None and hung.hang_report.stalled_ranks, vars(hung)
assert hung.rank == 1, str(hung)
print("hang:", hung)""",
]


def _outputs_text(cell):
    text = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            text.append(o.get("text", ""))
        elif o.get("output_type") == "error":
            text.append("%s: %s\n%s" % (o.get("ename"), o.get("evalue"), "\n".join(o.get("traceback", []))))
    return "".join(text)


class NotebookBase:
    via = None
    socket = None

    @unittest.skipUnless(HAVE_TORCH, "needs python3-torch")
    def test_notebook_ddp_failure_and_hang(self):
        import nbformat
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError

        nb = nbformat.v4.new_notebook()
        setup = _setup(self.via, self.socket)
        nb.cells = [nbformat.v4.new_code_cell(c.replace("{setup}", setup)) for c in NOTEBOOK_CELLS]
        client = NotebookClient(nb, timeout=240, kernel_name="python3")
        try:
            client.execute()
        except CellExecutionError as e:
            self.fail("the notebook failed:\n%s" % e)
        ddp = _outputs_text(nb.cells[2])
        self.assertIn("[0] rank 0 loss", ddp)
        self.assertIn("[1] rank 1 loss", ddp)
        self.assertIn("'world': 2", str(nb.cells[2].outputs[-1].get("data", {})))
        self.assertIn("ValueError: bad batch", _outputs_text(nb.cells[4]))  # rank 1's traceback, streamed
        self.assertIn("hang: rank 1", _outputs_text(nb.cells[6]))

    def _kernel(self, marker):
        import jupyter_client

        # Last: whatever a failed test left of the job.
        self.addCleanup(lambda: fixture.kill_marked("LTPY_MARK=" + marker))
        km = jupyter_client.KernelManager(kernel_name="python3")
        # A kernel killed mid-launch leaves its launch's temp dir: in one of ours.
        tmp = tempfile.mkdtemp(prefix="ltpy.kernel.")
        self.addCleanup(shutil.rmtree, tmp, True)
        km.start_kernel(env=dict(os.environ, LTPY_MARK=marker, TMPDIR=tmp, PYDEVD_DISABLE_FILE_VALIDATION="1"))
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        self.addCleanup(lambda: km.shutdown_kernel(now=True) if km.is_alive() else None)
        self.addCleanup(kc.stop_channels)
        code = textwrap.dedent("""\
            import ltd
            def sleeper():
                import time
                time.sleep(600)
            ltd.launch(sleeper, devices=2, via=%r, socket=%r, ltrun=%r, grace=%r)
        """ % (self.via, self.socket, fixture.LTRUN_BIN, "%gs" % GRACE))
        msg_id = kc.execute(code)
        # The ranks themselves (python3 -m ltd._rank DIR), not ltrun, whose
        # command line names theirs.
        ranks = lambda: [p for p in self._job_processes(marker) if _cmdline(p).split(b"\0")[1:3] == [b"-m", b"ltd._rank"]]
        self.assertTrue(fixture.wait_for(lambda: len(ranks()) == 2, 60), "the ranks did not start")
        return km, kc, msg_id

    def _job_processes(self, marker):
        # Every process of the job carries the kernel's environment (ltrun
        # too); the kernel itself is not the job's.
        return [p for p in fixture.processes_with_marker("LTPY_MARK=" + marker)
                if b"ipykernel" not in _cmdline(p)]

    def _marker(self, what):
        return "%s-%s-%d-%d" % (self.via, what, os.getpid(), time.monotonic_ns())

    def test_interrupt_tears_the_job_down_then_raises(self):
        marker = self._marker("interrupt")
        km, kc, msg_id = self._kernel(marker)
        km.interrupt_kernel()
        while True:
            reply = kc.get_shell_msg(timeout=60)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        self.assertEqual(reply["content"]["status"], "error")
        self.assertEqual(reply["content"]["ename"], "KeyboardInterrupt")
        # Raised once every rank is gone: nothing of the job may be left (a
        # process may still be on its way out of /proc for a moment).
        self.assertTrue(fixture.wait_for(lambda: not self._job_processes(marker), GRACE),
                        self._job_processes(marker))
        self.assertTrue(km.is_alive())

    def test_kernel_shutdown_leaves_no_rank(self):
        # Jupyter's shutdown: an interrupt, a shutdown request, a kill.
        marker = self._marker("shutdown")
        km, kc, _ = self._kernel(marker)
        km.shutdown_kernel(now=False)
        self.assertTrue(fixture.wait_for(lambda: not self._job_processes(marker), GRACE + 10),
                        self._job_processes(marker))

    def test_kernel_killed_leaves_no_rank(self):
        marker = self._marker("kill")
        km, kc, _ = self._kernel(marker)
        # A crash: SIGKILL and nothing before it (shutdown_kernel(now=True)
        # interrupts the kernel first, which tears the job down by itself).
        os.kill(km.provisioner.process.pid, signal.SIGKILL)
        self.assertTrue(fixture.wait_for(lambda: not self._job_processes(marker), GRACE + 10),
                        self._job_processes(marker))


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return b""


@fixture.needs_binaries
@unittest.skipUnless(HAVE_JUPYTER, "needs python3-nbclient, python3-ipykernel, python3-jupyter-client")
class NotebookUnderLtd(NotebookBase, unittest.TestCase):
    via = "ltd"

    @classmethod
    def setUpClass(cls):
        cls.d = fixture.Daemon().start()
        cls.socket = cls.d.socket

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()


@fixture.needs_binaries
@unittest.skipUnless(HAVE_JUPYTER, "needs python3-nbclient, python3-ipykernel, python3-jupyter-client")
class NotebookUnderLtrun(NotebookBase, unittest.TestCase):
    via = "ltrun"
    socket = "/nonexistent/ltd.sock"

    @unittest.skipUnless(HAVE_TORCH, "needs python3-torch")
    def test_the_example_notebook_runs(self):
        """examples/notebook/ddp.ipynb as it is, with no ltd: via="auto" takes ltrun (found beside the package)."""
        import nbformat
        from nbclient import NotebookClient

        path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "notebook", "ddp.ipynb")
        nb = nbformat.read(path, as_version=4)
        old = os.environ.get("LTD_SOCKET")
        os.environ["LTD_SOCKET"] = self.socket
        try:
            NotebookClient(nb, timeout=240, kernel_name="python3").execute()
        finally:
            if old is None:
                del os.environ["LTD_SOCKET"]
            else:
                os.environ["LTD_SOCKET"] = old
        code = [c for c in nb.cells if c.cell_type == "code"]
        self.assertIn("[0] epoch 0 loss", _outputs_text(code[2]))
        self.assertIn("failed: rank 1: ValueError: bad batch 4 (cell 4, line 4)", _outputs_text(code[3]))


if __name__ == "__main__":
    unittest.main()
