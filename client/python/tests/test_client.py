"""ltd.Client and ltd.Job against a real ltd: every verb, bad input, another user, ltd down, a restart."""

import io
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

import fixture
import ltd

SH = "/bin/sh"


@fixture.needs_binaries
class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = fixture.Daemon().start()
        cls.client = ltd.Client(cls.d.socket)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.d.stop()

    def test_submit_wait_show_ps_logs(self):
        job = self.client.submit([SH, "-c", 'echo "hello from $RANK of $WORLD_SIZE"'], 2,
                                 name="py-hello", detach=True)
        self.assertTrue(job.id)
        self.assertEqual(job.wait(), 0)
        self.assertEqual(job.state, "SUCCEEDED")
        self.assertEqual(job.exit_code, 0)
        self.assertIsNone(job.root_cause)
        self.assertEqual(len(job.info.ranks), 2)
        self.assertEqual(self.client.job("py-hello").id, job.id)  # by name
        self.assertIn(job.id, [j.id for j in self.client.ps(all=True)])
        self.assertNotIn(job.id, [j.id for j in self.client.ps()])  # finished
        lines = sorted(job.logs())
        self.assertEqual(lines, ["[0] hello from 0 of 2", "[1] hello from 1 of 2"])
        self.assertEqual(list(job.logs(rank=1)), ["hello from 1 of 2"])
        self.assertEqual(len(list(job.logs(tail=1))), 1)
        self.assertEqual(list(job.logs(rank=0, raw=True)), [b"hello from 0 of 2"])
        slots = self.client.gpus()
        self.assertEqual([s["slot"] for s in slots], list(range(8)))  # ltd --devices 8
        self.assertTrue(all(s["state"] in ("FREE", "BUSY") for s in slots))

    def test_ps_filters_drain_timestamps_and_output_files(self):
        failed = self.client.submit([SH, "-c", "echo one; exit 3"], 1, detach=True)
        self.assertEqual(failed.wait(), 3)
        self.assertIn(failed.id, [j.id for j in self.client.ps(state="FAILED")])
        self.assertIn(failed.id, [j.id for j in self.client.ps(state=["failed"], user="root")])
        self.assertNotIn(failed.id, [j.id for j in self.client.ps(state="RUNNING,PENDING", me=True)])
        self.assertNotIn(failed.id, [j.id for j in self.client.ps(all=True, user=os.getuid() + 1)])
        with self.assertRaises(ltd.InvalidArgument):
            self.client.ps(state="RUNNNING")
        with self.assertRaises(ltd.InvalidArgument):
            self.client.ps(user="no-such-user-ltd")

        lines = list(failed.logs(timestamps=True))
        self.assertEqual(len(lines), 1, lines)
        self.assertRegex(lines[0], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z \[0\] one$")
        self.assertEqual(list(failed.logs(since=3600)), ["[0] one"])
        self.assertEqual(list(failed.logs(since="0s")), [])

        out_dir = tempfile.mkdtemp()
        old_umask = os.umask(0o027)  # the files are made with the submitter's umask
        try:
            # Complete once the job has ended (they were written after its
            # end, empty at wait() about every other time): a few jobs.
            for _ in range(3):
                os.umask(0o027)
                job = self.client.submit([SH, "-c", "echo out $RANK; echo err $RANK >&2"], 2,
                                         output=os.path.join(out_dir, "o-%j-%t.log"),
                                         error=os.path.join(out_dir, "e-%j.log"), detach=True)
                os.umask(old_umask)
                self.assertEqual(job.wait(), 0)
                path = os.path.join(out_dir, "o-%s-1.log" % job.id)
                self.assertEqual(os.stat(path).st_mode & 0o777, 0o640)
                with open(path) as f:
                    self.assertEqual(f.read(), "out 1\n")
                with open(os.path.join(out_dir, "e-%s.log" % job.id)) as f:
                    self.assertEqual(sorted(f.read().splitlines()), ["[0] err 0", "[1] err 1"])
        finally:
            os.umask(old_umask)
            shutil.rmtree(out_dir)

        state = self.client.drain("py maintenance")
        try:
            self.assertTrue(state["draining"])
            self.assertEqual(state["reason"], "py maintenance")
            waiting = self.client.submit([SH, "-c", "true"], 1, detach=True)
            self.assertEqual(waiting.info.state, "PENDING")
            self.assertEqual(waiting.info.pending_reason, "ltd is draining: py maintenance")
        finally:
            self.assertFalse(self.client.resume()["draining"])
        self.assertEqual(waiting.wait(), 0)

    def test_attached_submit_streams_and_exits_with_the_root_cause(self):
        job = self.client.submit(
            [SH, "-c", 'echo out $RANK; echo err $RANK >&2; [ "$RANK" = 1 ] && exit 3; sleep 30'], 2,
            grace="1s")
        out, err = io.StringIO(), io.StringIO()
        self.assertEqual(job.attach(stdout=out, stderr=err), 3)
        self.assertIn("[1] out 1", out.getvalue())
        self.assertIn("[1] err 1", err.getvalue())
        self.assertEqual(job.state, "FAILED")
        self.assertEqual(job.root_cause.rank, 1)
        self.assertEqual(job.root_cause.reason, "exited")
        self.assertEqual(job.root_cause.exit_code, 3)
        self.assertEqual(job.root_cause.describe(), "rank 1 exited with code 3")

    def test_sbatch_states_and_dependencies(self):
        # Past its time limit: TIMEOUT (exit code 124 kept), as sbatch says.
        timed = self.client.submit([SH, "-c", "exec sleep 60"], 1, time_limit="1s", grace="1s",
                                   detach=True)
        self.assertEqual(timed.wait(), 124)
        self.assertEqual(timed.state, "TIMEOUT")
        self.assertIn(timed.id, [j.id for j in self.client.ps(state="TIMEOUT")])
        # afterany runs once the job ended, however; afternotok too here.
        after = self.client.submit([SH, "-c", "true"], 1, dependency="afterany:%s,afternotok:%s"
                                   % (timed.id, timed.id), detach=True)
        self.assertEqual(after.wait(), 0)
        self.assertEqual(after.state, "SUCCEEDED")
        with self.assertRaises(ltd.InvalidArgument) as e:
            self.client.submit([SH, "-c", "true"], 1, dependency="aftersome:1", detach=True)
        self.assertIn("'aftersome' is no dependency", str(e.exception))

    def test_array(self):
        # --array: one job per task, each with its own id in the array and
        # exit code; wait() of the array is its worst task's code.
        arr = self.client.submit(
            [SH, "-c", "echo $LTD_ARRAY_JOB_ID:$LTD_ARRAY_TASK_ID:$LTD_ARRAY_TASK_COUNT;"
                       " exit $LTD_ARRAY_TASK_ID"], 1, array="0,2%1")
        self.assertEqual(arr.wait(), 2)
        info = self.client.show(arr.id)
        self.assertEqual([t["task_id"] for t in info.array_tasks], [0, 2])
        self.assertEqual([t["exit_code"] for t in info.array_tasks], [0, 2])
        task = self.client.show("%s_2" % arr.id)
        self.assertEqual((task.array_job_id, task.array_task_id, task.array_task_count),
                         (arr.id, 2, 2))
        self.assertEqual(task.state, "FAILED")
        self.assertEqual(list(ltd.Job(self.client, "%s_2" % arr.id).logs()),
                         ["[0] %s:2:2" % arr.id])
        with self.assertRaises(ltd.InvalidArgument) as e:
            self.client.submit([SH, "-c", "true"], 1, array="5-2")
        self.assertIn("reversed", str(e.exception))

    def test_follow_logs_and_kill(self):
        job = self.client.submit([SH, "-c", "echo started; exec sleep 60"], 1, detach=True)
        # A line that came while nobody watched reaches the log a moment
        # later: follow from once it is there.
        self.assertTrue(fixture.wait_for(lambda: list(job.logs()) == ["[0] started"], 30))
        follow = job.logs(follow=True)
        self.assertEqual(next(follow), "[0] started")
        job.kill(signal="CONT")  # a signal only: the job runs on
        self.assertEqual(job.refresh().state, "RUNNING")
        job.kill()
        self.assertEqual(list(follow), [])  # ends with the job
        self.assertEqual(job.wait(), 130)
        self.assertEqual(job.state, "CANCELLED")
        self.assertEqual(job.root_cause.reason, "cancelled")
        with self.assertRaises(ltd.FailedPrecondition) as e:
            job.kill()
        self.assertIn("already ended", str(e.exception))

    def test_following_logs_of_a_busy_job_on_a_busy_machine_gets_every_line(self):
        code = "for i in range(50000): print('n', i)"
        with fixture.CpuHogs():
            job = self.client.submit([fixture.PYTHON, "-c", code], 4, detach=True)
            lines = list(job.logs(follow=True))
        self.assertEqual(fixture.every_line_once(lines, 4, 50000), "")
        self.assertEqual(job.wait(), 0)

    def test_hang_has_a_hang_report(self):
        job = self.client.submit([SH, "-c", "echo hb 1 >&3; exec sleep 60"], 2, heartbeat_timeout="1s",
                                 grace="1s", detach=True)
        self.assertEqual(job.wait(), 124)
        self.assertEqual(job.root_cause.reason, "hang")
        self.assertIsNotNone(job.hang_report)
        self.assertTrue(job.hang_report.stalled_ranks)
        self.assertIn("hang report: stalled rank(s)", str(job.hang_report))

    def test_bad_input(self):
        c = self.client
        with self.assertRaises(ltd.NotFound) as e:
            c.job("no-such-job")
        self.assertIn("no job 'no-such-job'", str(e.exception))
        with self.assertRaises(ltd.NotFound):
            c.kill("999999")
        with self.assertRaises(ltd.InvalidArgument):
            c.job("")
        with self.assertRaises(ltd.InvalidArgument):
            c.submit([SH, "-c", "true"], 0)
        with self.assertRaises(ltd.InvalidArgument):
            c.submit("sh -c true", 1)
        with self.assertRaises(ltd.InvalidArgument) as e:
            c.submit([SH, "-c", "true"], 1, heartbeat_timeout="soon")
        self.assertIn("is not a duration", str(e.exception))
        with self.assertRaises(ltd.InvalidArgument):
            c.submit([SH, "-c", "true"], 1, env={"A=B": "x"})
        with self.assertRaises(ltd.InvalidArgument):
            c.kill("1", signal="NOSUCHSIG")
        job = c.submit([SH, "-c", "true"], 1, detach=True)
        job.wait()
        with self.assertRaises(ltd.InvalidArgument) as e:
            list(job.logs(rank=5))
        self.assertIn("out of range", str(e.exception))
        with self.assertRaises(ltd.InvalidArgument):
            list(job.logs(tail=-1))
        # ltd's own refusal, from the daemon: a name with a NUL byte.
        with self.assertRaises(ltd.Error):
            c.submit([SH, "-c", "true"], 1, name=b"a\0b")

    def test_cancel_on_disconnect(self):
        """A client that submitted with cancel_on_disconnect and died takes its job along; detached, not."""
        marker = "LTPY_DISCONNECT=%d" % os.getpid()
        self.addCleanup(fixture.kill_marked, marker)
        # submit: an attached submit that asks for it; attach: a detached
        # job followed by an Attach that asks for it (as after a restart of
        # ltd); detach: neither.
        script = textwrap.dedent("""
            import sys, ltd
            c = ltd.Client(sys.argv[1])
            mode = sys.argv[3]
            job = c.submit(["/bin/sh", "-c", "exec sleep 60"], 2, env=[sys.argv[2]], grace="1s",
                           cancel_on_disconnect=mode == "submit", detach=mode != "submit")
            print(job.id, flush=True)
            if mode == "attach":
                for ev in ltd.Job(c, job.id, cancel_on_disconnect=True).events():
                    pass
            sys.stdin.read()
        """)
        for mode in ("submit", "attach", "detach"):
            cancel = mode != "detach"
            p = subprocess.Popen([sys.executable, "-c", script, self.d.socket, marker, mode],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            job_id = p.stdout.readline().decode().strip()
            self.assertTrue(job_id)
            self.assertTrue(fixture.wait_for(lambda: len(fixture.processes_with_marker(marker)) == 2, 30))
            if mode == "attach":  # ltd says so once the stream is open (and its cancel armed)
                self.assertTrue(fixture.wait_for(
                    lambda: "job=%s attach stream opened" % job_id in self.d.log(None), 30))
            p.kill()
            p.wait()
            p.stdin.close()
            p.stdout.close()
            job = self.client.job(job_id)
            if cancel:
                self.assertEqual(job.wait(), 130)
                self.assertIn("went away", job.root_cause.message)
                self.assertEqual(fixture.processes_with_marker(marker), [])
            else:
                # Its ranks run before ltd has heard that they started.
                self.assertTrue(fixture.wait_for(lambda: job.refresh().state == "RUNNING", 30),
                                job.state)
                job.kill()
                self.assertEqual(job.wait(), 130)
            self.assertTrue(fixture.wait_for(lambda: not fixture.processes_with_marker(marker), 15))

    def test_a_connect_flood_leaves_calls_served(self):
        # Flooders that keep ltd's listen queue full: a connect that does not
        # wait its turn fails with EAGAIN.
        flood = textwrap.dedent("""
            import socket, sys
            while True:
                s = socket.socket(socket.AF_UNIX)
                try:
                    s.connect(sys.argv[1])
                except OSError:
                    pass
                s.close()
        """)
        floods = [subprocess.Popen([fixture.PYTHON, "-c", flood, self.d.socket]) for _ in range(4)]
        try:
            failures = []
            for _ in range(20):
                c = ltd.Client(self.d.socket)  # a connect of its own each time
                try:
                    c.ps()
                except ltd.Error as e:
                    failures.append(str(e))
                finally:
                    c.close()
            self.assertEqual(failures, [])
        finally:
            for p in floods:
                p.kill()
                p.wait()

    @unittest.skipUnless(os.geteuid() == 0, "needs root for a throwaway user")
    def test_another_users_job(self):
        job = self.client.submit([SH, "-c", "exec sleep 60"], 1, detach=True, grace="1s")
        user = "ltpy%d" % (os.getpid() % 100000)
        subprocess.run(["/usr/sbin/userdel", "-r", user], capture_output=True)
        subprocess.run(["/usr/sbin/useradd", "-M", "-s", "/bin/sh", user], check=True, capture_output=True)
        public = tempfile.mkdtemp(prefix="ltpy.pub.", dir="/tmp")
        try:
            os.chmod(public, 0o755)
            shutil.copytree(os.path.dirname(ltd.__file__), os.path.join(public, "ltd"))
            script = textwrap.dedent("""
                import sys, ltd
                c = ltd.Client(sys.argv[1])
                job = c.job(sys.argv[2])   # show: for everyone
                print("state", job.state)
                for what, call in (("kill", job.kill), ("logs", lambda: list(job.logs())),
                                   ("attach", lambda: list(job.events()))):
                    try:
                        call()
                        print(what, "allowed")
                    except ltd.PermissionDenied as e:
                        print(what, "denied:", e)
            """)
            r = subprocess.run(["/usr/sbin/runuser", "-u", user, "--", fixture.PYTHON, "-c", script,
                                self.d.socket, job.id], capture_output=True, timeout=60, cwd="/",
                               env={"PYTHONPATH": public, "PATH": "/usr/bin:/bin"})
            out = r.stdout.decode()
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            self.assertIn("state RUNNING", out)
            for what in ("kill", "logs", "attach"):
                self.assertIn(what + " denied: job %s belongs to root; only its owner or root may do that"
                              % job.id, out)
            self.assertEqual(job.refresh().state, "RUNNING")
        finally:
            job.kill()
            job.wait()
            shutil.rmtree(public, ignore_errors=True)
            subprocess.run(["/usr/sbin/userdel", "-r", user], capture_output=True)


@fixture.needs_binaries
class LtdDownTest(unittest.TestCase):
    def test_every_call_says_ltd_is_not_reachable(self):
        path = os.path.join(tempfile.gettempdir(), "ltpy-nothing-%d.sock" % os.getpid())
        c = ltd.Client(path)
        self.assertFalse(c.reachable())
        for call in (c.ps, lambda: c.job("1"), lambda: c.kill("1"), lambda: c.submit([SH], 1)):
            with self.assertRaises(ltd.Unreachable) as e:
                call()
            self.assertIn("cannot reach ltd at " + path, str(e.exception))
            self.assertIn("start it with `ltd --socket", str(e.exception))
        with self.assertRaises(ltd.Unreachable):
            ltd.launch(print, via="ltd", socket=path)
        with self.assertRaises(ltd.InvalidArgument):
            ltd.Client("/tmp/" + "x" * 200)

    def test_default_socket_from_the_environment(self):
        old = os.environ.get("LTD_SOCKET")
        os.environ["LTD_SOCKET"] = "/tmp/ltpy-env.sock"
        try:
            self.assertEqual(ltd.Client().socket, "/tmp/ltpy-env.sock")
            del os.environ["LTD_SOCKET"]
            self.assertEqual(ltd.Client().socket, ltd.DEFAULT_SOCKET)
        finally:
            if old is not None:
                os.environ["LTD_SOCKET"] = old


@fixture.needs_binaries
class _DyingLtd:
    """A stand-in for an ltd that dies as it takes a connection: a socket at
    ltd's path whose queue holds one connection (a backlog of none), closed
    once one came, so that nothing listens after it."""

    def __init__(self, path):
        if os.path.exists(path):
            os.unlink(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(0)

    def takes_one_connection_and_goes(self):
        """Whether a connection came within 30 s."""
        try:
            return bool(select.select([self.sock], [], [], 30)[0])
        finally:
            self.sock.close()


def _in_thread(fn):
    """Runs fn() on a thread of its own: (the thread, a dict that holds
    "value", fn's return, or "error", what it raised, once it ends)."""
    result = {}

    def run():
        try:
            result["value"] = fn()
        except Exception as e:  # whatever it is, the test reports it
            result["error"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, result


def _dying_ltd_takes_a_connection(path):
    return _DyingLtd(path).takes_one_connection_and_goes()


class RestartTest(unittest.TestCase):
    def _ended(self, t, result, what):
        """The value of _in_thread's call once its thread ends (within two
        minutes); the test fails on its error."""
        t.join(120)
        self.assertFalse(t.is_alive(), "the %s did not end" % what)
        self.assertNotIn("error", result, repr(result.get("error")))
        return result["value"]

    def test_wait_and_attach_follow_the_job_through_a_restart_of_ltd(self):
        d = fixture.Daemon("--restore-window", "1m").start()
        try:
            c = ltd.Client(d.socket)
            gate = os.path.join(d.dir, "gate")
            job = c.submit([SH, "-c", 'while [ ! -e %s ]; do sleep 0.05; done; echo done $RANK' % gate], 1)
            out, err = io.StringIO(), io.StringIO()
            result = {}
            t = threading.Thread(target=lambda: result.setdefault("code", job.attach(out, err)))
            t.start()
            self.assertTrue(fixture.wait_for(lambda: c.job(job.id).state == "RUNNING", 30))
            d.terminate()
            d.start()
            # The attach goes on from where it was in the job's log once
            # the new ltd has it (its debug log says so).
            self.assertTrue(fixture.wait_for(lambda: "attach stream opened" in d.log(None) or not t.is_alive(), 60),
                            d.log())
            open(gate, "w").close()
            t.join(60)
            self.assertEqual(result.get("code"), 0, err.getvalue())
            self.assertIn("lost ltd", err.getvalue())
            self.assertIn("[0] done 0", out.getvalue())
            self.assertEqual(ltd.Client(d.socket).job(job.id).wait(), 0)
        finally:
            d.stop()

    def test_a_client_that_submitted_submits_again_after_a_restart_and_is_told_when_ltd_is_gone(self):
        # Submits after the first skip the checks of ltd's socket: a send
        # that fails makes them again, so neither a restart nor a stopped
        # ltd is taken for ltd "going away" mid-submit.
        d = fixture.Daemon().start()
        try:
            c = ltd.Client(d.socket)
            first = c.submit(["/bin/true"], 1, detach=True)
            self.assertEqual(first.wait(), 0)
            d.terminate()
            d.start()
            again = c.submit(["/bin/true"], 1, detach=True)
            self.assertEqual(again.wait(), 0)
            self.assertNotEqual(again.id, first.id)
            d.terminate()
            if os.path.exists(d.socket):
                os.unlink(d.socket)
            t0 = time.monotonic()
            with self.assertRaises(ltd.Unreachable) as e:
                c.submit(["/bin/true"], 1, detach=True)
            self.assertIn("cannot reach ltd at " + d.socket, str(e.exception))
            self.assertLess(time.monotonic() - t0, 30, "waited for an ltd that is gone")
        finally:
            d.stop()

    def test_a_submit_whose_ltd_dies_after_its_first_connect_waits_for_the_next(self):
        # The client's first connection is taken by an ltd that dies before
        # it answers, and nothing listens after it: the submit waits for the
        # next ltd. (Its socket was once looked at twice, and the second look,
        # after such a death, said that ltd was not running.)
        d = fixture.Daemon().start()
        try:
            d.kill_hard()
            stand_in = _DyingLtd(d.socket)
            t, result = _in_thread(lambda: ltd.Client(d.socket).submit(["/bin/true"], 1, detach=True))
            self.assertTrue(stand_in.takes_one_connection_and_goes(), "the client never connected")
            d.start()
            job = self._ended(t, result, "submit")
            self.assertEqual(job.wait(), 0)
            self.assertEqual([j.id for j in ltd.Client(d.socket).ps(all=True)], [job.id])
        finally:
            d.stop()

    def test_a_wait_whose_ltd_dies_again_as_it_comes_back_waits_for_the_next(self):
        d = fixture.Daemon("--restore-window", "1m").start()
        try:
            c = ltd.Client(d.socket)
            job = c.submit([SH, "-c", "sleep 4; exit 3"], 1, detach=True)
            self.assertTrue(fixture.wait_for(lambda: c.job(job.id).state == "RUNNING", 30))
            err = io.StringIO()
            t, result = _in_thread(lambda: ltd.Client(d.socket).job(job.id).wait(say=lambda s: err.write(s + "\n")))
            self.assertTrue(fixture.wait_for(lambda: "wait stream opened" in d.log(None), 30), d.log())
            d.kill_hard()
            self.assertTrue(_dying_ltd_takes_a_connection(d.socket), "the client never tried ltd again")
            d.start()
            self.assertEqual(self._ended(t, result, "wait"), 3, err.getvalue())
            self.assertIn("lost ltd", err.getvalue())
        finally:
            d.stop()

    def test_logs_with_a_tail_follow_the_job_through_a_restart_of_ltd(self):
        d = fixture.Daemon("--restore-window", "1m").start()
        try:
            c = ltd.Client(d.socket)
            gate = os.path.join(d.dir, "gate")
            code = (
                "import os, sys, time\n"
                "for i in range(3000): print('n', i)\n"
                "sys.stdout.flush()\n"
                "while not os.path.exists(%r): time.sleep(0.05)\n"
                "for i in range(3000, 6000): print('n', i)\n" % gate
            )
            job = c.submit([fixture.PYTHON, "-c", code], 2, detach=True)
            # The first batch is whole in the log: its last lines are known.
            self.assertTrue(fixture.wait_for(
                lambda: all(list(job.logs(rank=r, tail=1)) == ["n 2999"] for r in (0, 1)), 60))
            last5 = list(job.logs(tail=5))
            lines = []

            def follow():
                for line in job.logs(follow=True, tail=5):
                    lines.append(line)

            t = threading.Thread(target=follow)
            t.start()
            self.assertTrue(fixture.wait_for(lambda: len(lines) == 5, 30))
            d.terminate()
            d.start()
            open(gate, "w").close()
            t.join(120)
            self.assertFalse(t.is_alive())
            # The tail, then every line after it once, in each rank's order.
            self.assertEqual(lines[:5], last5)
            at = {0: 3000, 1: 3000}
            for line in lines[5:]:
                r, i = line[1:].split("] n ")
                self.assertEqual(int(i), at[int(r)], line)
                at[int(r)] += 1
            self.assertEqual(at, {0: 6000, 1: 6000})
            self.assertEqual(ltd.Client(d.socket).job(job.id).wait(), 0)
        finally:
            d.stop()


if __name__ == "__main__":
    unittest.main()
