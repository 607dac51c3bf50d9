"""Many jobs from one process, and many kept jobs across a restart: what
bench/throughput_bench.py measures for speed, checked here for loss.

Every job submitted as fast as one client can gets its record, its log and
its exit code; 10,000 kept jobs come back from a restart of ltd with every
field ps and show give. About 40 s on a 2-core VM.
"""

import concurrent.futures
import dataclasses
import unittest

import fixture
import ltd

SH = "/bin/sh"


def fields(info):
    """What a job's record says, as comparable values (no live-only fields)."""
    d = dataclasses.asdict(info)
    d.pop("pending_reason", None)
    return d


@fixture.needs_binaries
class ThroughputTest(unittest.TestCase):
    def test_jobs_submitted_as_fast_as_one_client_can_keep_record_log_and_exit_code(self):
        d = fixture.Daemon("--user-max-pending-jobs", "0").start()
        try:
            c = ltd.Client(d.socket)
            n = 300

            def one(i):
                job = c.submit([SH, "-c", "echo line $0 of $RANK; exit $(($0 % 3))", str(i)], 1,
                               detach=True)
                return i, job

            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                jobs = list(pool.map(one, range(n)))
            self.assertEqual(len({job.id for _, job in jobs}), n, "two submits got one job")
            for i, job in jobs:
                self.assertEqual(job.wait(), i % 3, job.id)
                info = c.show(job.id)
                self.assertEqual(info.state, "SUCCEEDED" if i % 3 == 0 else "FAILED", job.id)
                self.assertEqual(info.exit_code, i % 3)
                self.assertEqual(info.argv[-1], str(i))
                self.assertIsNotNone(info.ended_at)
                lines = list(job.logs())
                self.assertEqual(lines, ["[0] line %d of 0" % i], job.id)
        finally:
            d.stop()

    def test_ten_thousand_kept_jobs_come_back_from_a_restart_whole(self):
        d = fixture.Daemon("--user-max-pending-jobs", "0", "--keep-jobs", "20000").start()
        try:
            c = ltd.Client(d.socket)
            # Every device held: the arrays' tasks wait, and are cancelled
            # waiting (records as run jobs leave, made fast).
            blocker = c.submit(["sleep", "600"], 8, detach=True)
            self.assertTrue(fixture.wait_for(lambda: c.show(blocker.id).state == "RUNNING", 30))
            for _ in range(10):
                c.submit(["/bin/true", "x" * 3000], 1, array="0-999", name="sweep").kill()
            blocker.kill()
            # And some that ran, with output and an exit code each.
            ran = [c.submit([SH, "-c", "echo ran $0; exit $0", str(k)], 1, detach=True)
                   for k in range(4)]
            for k, job in enumerate(ran):
                self.assertEqual(job.wait(), k)
            self.assertTrue(fixture.wait_for(lambda: not c.ps(), 60), c.ps())
            before = {j.id: fields(j) for j in c.ps(all=True)}
            self.assertEqual(len(before), 10000 + 1 + len(ran))
            shown = {j.id: fields(c.show(j.id)) for j in ran}
            c.close()
            d.terminate()
            d.start()
            c = ltd.Client(d.socket)
            after = {j.id: fields(j) for j in c.ps(all=True)}
            self.assertEqual(sorted(after), sorted(before))
            for job_id, was in before.items():
                self.assertEqual(after[job_id], was, job_id)
            for k, job in enumerate(ran):
                self.assertEqual(fields(c.show(job.id)), shown[job.id])
                self.assertEqual(list(c.job(job.id).logs()), ["[0] ran %d" % k])
            # A task's command line, longer than a kept summary holds in
            # memory, comes back whole from its record.
            task = next(j for j in before.values() if j["name"] == "sweep")
            self.assertEqual(c.show(task["id"]).argv, ["/bin/true", "x" * 3000])
        finally:
            d.stop()


if __name__ == "__main__":
    unittest.main()
