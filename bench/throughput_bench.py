#!/usr/bin/python3
"""What a job costs ltd: submits queued, jobs run to the end, a restart with
many kept jobs; and a local Slurm doing the same in the same run.

From one Python client process (the ltd package, as a sweep or workflow
engine would), 1-rank `/bin/true` jobs:

  queued   every device busy (one job holds the only device), submits from
           --threads threads until --pending jobs wait; the rate and ltd's
           CPU a submit over a window of --window submits at each depth,
           and the time to queue the deepest.
  run      ltd --devices 512: --jobs jobs from 1 and --threads threads,
           each submitting and waiting for the exit; jobs/s and the CPU of
           ltd and everything it started (supervisors, helpers, the job's
           own /bin/true) a job, and that less /bin/true's own start
           (measured alone, spawned from this process), which the target
           leaves out; and less what the jobs' own processes used as
           their records count it (their cgroup's, this run's load
           included). An 8-rank job's submit to exit, too.
  split    where a 1-rank job's CPU goes (--jobs jobs, one at a time):
           its supervisor's own, its rank's start and program (the
           supervisor's child that becomes the rank, or lt-exec, and
           /bin/true, which the supervisor reaps), and ltd's own
           (not in the default set).
  floor    no ltd at all: /bin/true spawned and reaped in a loop from 1
           and 2 processes for --floor-seconds, and from 1 beside a
           process that only spins in user space: the most starts a second
           this machine makes, and the CPU each takes with both cores
           starting, or with the other core busy (as a launcher's own work
           keeps it). A 1-rank job is one such start, so no launcher here
           runs more 1-rank jobs a second than this (start_floor.py).
  restart  --kept finished jobs kept (--keep-jobs), ltd stopped and
           started: how long until it answers `ps`, and its RSS a kept
           job.
  slurm    a local slurmctld and slurmd (tests/slurm/cluster.sh): `sbatch
           --hold --wrap /bin/true` queued from --threads threads, and
           `sbatch --wrap /bin/true` run to the end, timed as above; the
           ratio ltd / Slurm.

--base BUILD runs every ltd measurement with that build too, in turns
(base, this, base, ...), for a before/after of the same run.
Not a test: nothing is asserted. Medians of --runs (default 3).

Usage: bench/throughput_bench.py [--build DIR] [--base DIR] [--only queued,run,split,floor,restart,slurm]
"""

import argparse
import concurrent.futures
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from local_slurm import LocalSlurm
from start_floor import bench_floor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLK = os.sysconf("SC_CLK_TCK")
# The floor's cases: (processes spawning, processes spinning beside them).
FLOORS = ((1, 0), (2, 0), (1, 1))


def cpu_seconds(pid, children=True):
    """utime + stime of pid, with its reaped children's."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / CLK


def program_cpu_ms(argv=("/bin/true",), n=300):
    """ms of CPU one start of `argv` costs, spawned alone from this process
    (posix_spawn, then reaped): the job's own program, which the target
    (ltd and its helpers) leaves out of a job's CPU."""
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(n):
        pid = os.posix_spawn(argv[0], list(argv), {})
        os.waitpid(pid, 0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used / n * 1000


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Ltd:
    """An ltd of `build` on a socket and state dir of its own."""

    def __init__(self, build, devices, extra=(), state=None):
        self.build = build
        self.dir = tempfile.mkdtemp(prefix="ltd-tput.")
        self.state = state or os.path.join(self.dir, "state")
        self.sock = os.path.join(self.dir, "ltd.sock")
        self.args = [f"{build}/daemon/ltd", "--socket", self.sock, "--state-dir", self.state,
                     "--devices", str(devices), "--log-level", "warn", *LTD_ARGS, *extra]
        self.start()

    def start(self):
        self.log = open(os.path.join(self.dir, "ltd.log"), "a")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=self.log)
        try:
            self.client = client_for(self.build, self.sock)
            deadline = t0 + 600
            while True:
                if self.proc.poll() is not None:
                    sys.exit(f"ltd did not start; see {self.dir}/ltd.log")
                try:
                    self.client.ps()
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        sys.exit(f"ltd did not answer; see {self.dir}/ltd.log")
                    time.sleep(0.005)
        except BaseException as e:
            # No client (the ltd package not importable: run with Debian's
            # python3), or no answer: the ltd started is not left running,
            # and its dir stays only when its log tells why.
            self.proc.terminate()
            self.proc.wait(timeout=120)
            self.log.close()
            if not isinstance(e, SystemExit):
                shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.started_in = time.monotonic() - t0

    def cpu(self):
        """ltd's CPU, its reaped children's, and its live children's (a
        supervisor kept for the next job is reaped only when ltd stops),
        each with the children it reaped (the jobs' ranks)."""
        total = cpu_seconds(self.proc.pid)
        for child in all_children(self.proc.pid):
            try:
                total += cpu_seconds(int(child))
            except OSError:
                pass  # reaped since: counted in ltd's children's
        return total

    def stop(self, keep_state=False):
        self.client.close()
        self.proc.terminate()
        self.proc.wait(timeout=120)
        self.log.close()
        if not keep_state:
            shutil.rmtree(self.dir, ignore_errors=True)


_clients = {}


def client_for(build, sock):
    """The ltd package of `build` (each build's own, imported once)."""
    if build not in _clients:
        sys.path.insert(0, os.path.join(build, "python"))
        for m in [m for m in sys.modules if m == "ltd" or m.startswith("ltd.")]:
            del sys.modules[m]
        import ltd  # noqa: E402

        _clients[build] = ltd
        sys.path.pop(0)
    return _clients[build].Client(sock)


def submit_many(client, n, threads, argv=("/bin/true",), wait=False, devices=1, ids=None):
    """n submits from `threads` threads; seconds taken. With wait, each
    thread waits for its job's exit before its next submit. The jobs' ids
    are appended to `ids` where given."""
    def one(_):
        job = client.submit(list(argv), devices, detach=not wait)
        if ids is not None:
            ids.append(job.id)
        if wait:
            job.wait()

    t0 = time.monotonic()
    if threads == 1:
        for i in range(n):
            one(i)
    else:
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, range(n)))
    return time.monotonic() - t0


# Arguments every ltd of the measurement in this process gets (--ltd-args).
LTD_ARGS = []


def in_child(fn, build, ltd_args=()):
    """fn(build) in a child process: each build's Python client registers
    its own ltd.proto, and protobuf's one descriptor pool a process takes
    one version of a file only. Its ltds get `ltd_args`."""
    import pickle

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        LTD_ARGS[:] = list(ltd_args)
        code = 0
        try:
            data = pickle.dumps(("ok", fn(build)))
        except BaseException as e:  # noqa: B902 (the parent re-raises it)
            data = pickle.dumps(("error", repr(e)))
            code = 1
        with os.fdopen(w, "wb") as out:
            out.write(data)
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as inp:
        data = inp.read()
    os.waitpid(pid, 0)
    kind, value = pickle.loads(data) if data else ("error", "the child died")
    if kind != "ok":
        sys.exit(f"a measurement of {build} failed: {value}")
    return value


def med(values):
    return statistics.median(values) if values else float("nan")


def bench_queued(build, pendings, threads, window):
    """{depth: (jobs/s, ms of ltd CPU a submit)}, seconds to queue the deepest."""
    d = Ltd(build, devices=1, extra=["--user-max-pending-jobs", "0"])
    try:
        blocker = d.client.submit(["sleep", "3600"], 1, detach=True)
        deadline = time.monotonic() + 30
        while d.client.show(blocker.id).state != "RUNNING" and time.monotonic() < deadline:
            time.sleep(0.01)
        out, queued, fill = {}, 0, 0.0
        for depth in sorted(pendings):
            if depth - window > queued:
                fill += submit_many(d.client, depth - window - queued, threads)
                queued = depth - window
            cpu0 = d.cpu()
            took = submit_many(d.client, window, threads)
            fill += took
            queued += window
            out[depth] = (window / took, (d.cpu() - cpu0) / window * 1000)
        return out, fill
    finally:
        # A running job outlives ltd's stop (its supervisor waits
        # --restore-window for the next ltd): the blocker ends first.
        try:
            d.client.kill(blocker.id)
            deadline = time.monotonic() + 30
            while (d.client.show(blocker.id).state in ("PENDING", "STARTING", "RUNNING")
                   and time.monotonic() < deadline):
                time.sleep(0.01)
        except NameError:
            pass  # no blocker yet
        d.stop()


def jobs_own_cpu_ms(state, ids):
    """ms of CPU a job that the jobs' own processes used, as their records
    say (each attempt's cgroup count, `cpu_us`); None where a record has
    none (a build before the count, or no cgroup v2)."""
    total = 0
    for job_id in ids:
        try:
            with open(os.path.join(state, "jobs", str(job_id), "job.json")) as f:
                record = json.load(f)
        except (OSError, ValueError):
            return None
        for attempt in record.get("attempts") or []:
            if not isinstance(attempt.get("cpu_us"), int):
                return None
            total += attempt["cpu_us"]
    return total / 1000 / len(ids) if ids else None


def bench_run(build, jobs, threads, ranks=1):
    """(jobs/s, ms of CPU a job of ltd and all it started, ms of it the
    jobs' own processes used by their records or None) over `jobs` jobs."""
    d = Ltd(build, devices=512)
    try:
        submit_many(d.client, min(20, jobs), threads, wait=True)  # warm: spares, caches
        cpu0 = d.cpu()
        ids = []
        took = submit_many(d.client, jobs, threads, wait=True, devices=ranks, ids=ids)
        # The last supervisors are reaped (their CPU counted) once they exit.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(children(d.proc.pid)) > 1:
            time.sleep(0.01)
        used = (d.cpu() - cpu0) / jobs * 1000
        return jobs / took, used, jobs_own_cpu_ms(d.state, ids)
    finally:
        d.stop()


def own_and_reaped(pid):
    """(CPU seconds of `pid` itself, of the children it reaped)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    hz = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / hz, (int(fields[13]) + int(fields[14])) / hz


def bench_split(build, jobs):
    """Where a 1-rank job's CPU goes, ms a job, one job at a time: each
    supervisor's own, what its ranks' starts and programs took (the start
    and /bin/true, reaped by it), and ltd's own. Supervisors serve job
    after job, so those alive at the end served nearly every job."""
    d = Ltd(build, devices=512)
    try:
        submit_many(d.client, 20, 1, wait=True)

        def snap():
            out = {}
            for child in all_children(d.proc.pid):
                try:
                    out[child] = own_and_reaped(int(child))
                except OSError:
                    pass
            return out, own_and_reaped(d.proc.pid)[0]

        (shims0, ltd0) = snap()
        submit_many(d.client, jobs, 1, wait=True)
        (shims1, ltd1) = snap()
        own = sum(v[0] - shims0.get(k, (0, 0))[0] for k, v in shims1.items())
        ranks = sum(v[1] - shims0.get(k, (0, 0))[1] for k, v in shims1.items())
        return own / jobs * 1000, ranks / jobs * 1000, (ltd1 - ltd0) / jobs * 1000, len(shims1)
    finally:
        d.stop()


def all_children(pid):
    """The children of every thread of `pid`."""
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += f.read().split()
        except OSError:
            pass
    return out


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return f.read().split()
    except OSError:
        return []


def bench_restart(build, kept, big=100):
    """(seconds until ltd answers after a restart with `kept` finished jobs
    kept, KiB of ltd's RSS a kept job, KiB a kept job with a 512 KiB command
    line and environment). The jobs are arrays' tasks cancelled while they
    wait (one device, held): as many records as run jobs leave, made fast."""
    d = Ltd(build, devices=1, extra=["--keep-jobs", str(kept + big + 1),
                                     "--user-max-pending-jobs", "0"])
    try:
        blocker = d.client.submit(["sleep", "3600"], 1, detach=True)
        for start in range(0, kept, 1000):
            n = min(1000, kept - start)
            d.client.submit(["/bin/true"], 1, array=f"0-{n - 1}").kill()
        blocker.kill()
        deadline = time.monotonic() + 60
        while len(d.client.ps()) and time.monotonic() < deadline:
            time.sleep(0.05)

        def restart():
            d.proc.terminate()
            d.proc.wait(timeout=120)
            d.log.close()
            d.client.close()
            d.start()
            return d.started_in, rss_kib(d.proc.pid), len(d.client.ps(all=True))

        answered, rss_small, listed = restart()
        if listed < kept:
            print(f"  restart: only {listed} of {kept} jobs listed after the restart")
        # The same again with `big` jobs of a 256 KiB command line and a
        # 256 KiB environment more.
        # (Linux takes at most 128 KiB an argument or variable.)
        args = ["x" * (64 << 10)] * 4
        env = {f"BIG{i}": "y" * (64 << 10) for i in range(4)}
        for _ in range(big):
            d.client.submit(["/bin/true", *args], 1, environ=env, detach=True).wait()
        _, rss_big, _ = restart()
        base = Ltd(build, devices=1)
        rss0 = rss_kib(base.proc.pid)
        base.stop()
        return answered, (rss_small - rss0) / kept, (rss_big - rss_small) / big
    finally:
        d.stop()


# slurmctld's default MaxJobCount (10,000) refuses jobs past it, the
# bench's cluster (tests/slurm/cluster.sh) keeps the default.
SLURM_MAX_PENDING = 9000


def slurm_queued(s, pendings, threads, window):
    """{depth: jobs/s}; a depth past SLURM_MAX_PENDING is measured at it."""
    out, queued = {}, 0
    def many(n):
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda _: s.sbatch("--hold", "--wrap", "/bin/true"), range(n)))
        return time.monotonic() - t0
    for depth in sorted(pendings):
        at = min(depth, SLURM_MAX_PENDING)
        if at - window > queued:
            many(at - window - queued)
            queued = at - window
        out[depth] = window / many(window)
        queued += window
    return out


def slurm_run(s, jobs, threads):
    """Jobs/s, each thread submitting and waiting (sbatch --wait)."""
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda _: s.sbatch("--wait", "--wrap", "/bin/true"), range(jobs)))
    return jobs / (time.monotonic() - t0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--base", help="a build of the previous main, measured in turns")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--pending", default="100,1000,10000")
    p.add_argument("--window", type=int, default=100)
    p.add_argument("--jobs", type=int, default=300)
    p.add_argument("--kept", type=int, default=10000)
    p.add_argument("--floor-seconds", type=float, default=5)
    p.add_argument("--only", default="queued,run,restart,slurm")
    p.add_argument("--ltd-args", default="", help="more arguments for this build's ltd")
    p.add_argument("--base-ltd-args", default="", help="more arguments for the base's ltd "
                   "(with --base the same build: one build measured two ways)")
    args = p.parse_args()
    only = set(args.only.split(","))
    pendings = [int(x) for x in args.pending.split(",")]
    builds = [("this", os.path.abspath(args.build))]
    if args.base:
        builds.insert(0, ("base", os.path.abspath(args.base)))
    ltd_args = {"this": shlex.split(args.ltd_args), "base": shlex.split(args.base_ltd_args)}
    results = {name: {} for name, _ in builds}

    def turn(key, fn):
        for _ in range(args.runs):
            for name, build in builds:
                results[name].setdefault(key, []).append(in_child(fn, build, ltd_args[name]))

    if "queued" in only:
        turn("queued", lambda b: bench_queued(b, pendings, args.threads, args.window))
    true_ms = None
    if "run" in only:
        true_ms = med([program_cpu_ms() for _ in range(args.runs)])
        for t in (1, args.threads):
            turn(f"run{t}", lambda b, t=t: bench_run(b, args.jobs, t))
        turn("run8ranks", lambda b: bench_run(b, max(args.jobs // 10, 10), 1, ranks=8))
    if "split" in only:
        turn("split", lambda b: bench_split(b, args.jobs))
    if "restart" in only:
        turn("restart", lambda b: bench_restart(b, args.kept))
    floor = {}
    if "floor" in only:
        for w, spin in FLOORS:
            floor[w, spin] = [bench_floor(w, args.floor_seconds, spin) for _ in range(args.runs)]

    for name, _ in builds:
        r = results[name]
        if not r:
            continue
        print(f"== ltd ({name}: {dict(builds)[name]} {' '.join(ltd_args[name])})")
        if "queued" in r:
            for depth in sorted(pendings):
                rates = [q[0][depth][0] for q in r["queued"]]
                cpus = [q[0][depth][1] for q in r["queued"]]
                print(f"queued, {depth:>6} pending, {args.threads} threads: {med(rates):8.0f} jobs/s, "
                      f"{med(cpus):6.2f} ms of ltd's CPU a submit  (rates {[round(x) for x in rates]})")
            print(f"queued, {max(pendings)} jobs in {med([q[1] for q in r['queued']]):.1f} s")
        for t in (1, args.threads):
            if f"run{t}" in r:
                rates = [x[0] for x in r[f"run{t}"]]
                cpus = [x[1] for x in r[f"run{t}"]]
                print(f"run to the end, {t} thread(s): {med(rates):8.1f} jobs/s, {med(cpus):6.2f} ms "
                      f"of CPU a job (ltd + helpers + /bin/true), {med(cpus) - true_ms:6.2f} ms "
                      f"without /bin/true  (rates {[round(x) for x in rates]})")
                own = [x[2] for x in r[f"run{t}"] if len(x) > 2 and x[2] is not None]
                if own:
                    # Each job's /bin/true as its own cgroup counted it, in
                    # this run: under load it costs more than alone.
                    less = [x[1] - x[2] for x in r[f"run{t}"] if x[2] is not None]
                    print(f"  without the jobs' own processes as their records count them "
                          f"({med(own):.2f} ms a job): {med(less):6.2f} ms of CPU a job "
                          f"(each run {[round(x, 2) for x in less]})")
        if true_ms is not None and name == builds[-1][0]:
            print(f"/bin/true alone, spawned from this process: {true_ms:.2f} ms of CPU a start")
        if "run8ranks" in r:
            print(f"8-rank jobs, 1 thread: {1000 / med([x[0] for x in r['run8ranks']]):.1f} ms submit "
                  f"to exit, {med([x[1] for x in r['run8ranks']]):.2f} ms of CPU a job")
        if "split" in r:
            sp = r["split"]
            print(f"a 1-rank job's CPU, 1 thread: {med([x[0] for x in sp]):.2f} ms its supervisor's "
                  f"own, {med([x[1] for x in sp]):.2f} ms its rank's start and program ("
                  f"/bin/true), {med([x[2] for x in sp]):.2f} ms ltd's own "
                  f"({[x[3] for x in sp]} supervisors alive at the end)")
            # The VM's speed drifts from run to run, moving every figure
            # together: where one side is unchanged, the ratio of the two
            # in each run compares builds better than either alone.
            print(f"  each run, ltd's own / the supervisor's own: "
                  f"{[round(x[2] / x[0], 3) for x in sp if x[0] > 0]}")
        if "restart" in r:
            print(f"restart with {args.kept} kept jobs: answers in "
                  f"{med([x[0] for x in r['restart']]):.2f} s, "
                  f"{med([x[1] for x in r['restart']]):.1f} KiB of ltd's RSS a kept job, "
                  f"{med([x[2] for x in r['restart']]):.1f} KiB a kept job of a 256 KiB "
                  f"command line and 256 KiB environment")

    for (w, spin), runs in floor.items():
        beside = " beside 1 process spinning in user space" if spin else ""
        print(f"== no ltd: /bin/true spawned and reaped from {w} process(es){beside}: "
              f"{med([x[0] for x in runs]):.0f} starts/s, {med([x[1] for x in runs]):.2f} ms "
              f"of the machine's CPU a start, {med([x[2] for x in runs]):.2f} ms the spawners' "
              f"own  (rates {[round(x[0]) for x in runs]})")
    if (2, 0) in floor and f"run{args.threads}" in results["this"]:
        ours = med([x[0] for x in results["this"][f"run{args.threads}"]])
        print(f"run to the end from {args.threads} threads: "
              f"{100 * ours / med([x[0] for x in floor[2, 0]]):.0f}% "
              f"of the starts a second of /bin/true alone")

    if "slurm" in only:
        # A fresh cluster each run: slurmctld keeps ended jobs for
        # MinJobAge (300 s), and they count toward MaxJobCount.
        sq, sr = [], []
        for _ in range(args.runs):
            try:
                s = LocalSlurm(prefix="slurm-tput.")
            except RuntimeError as e:
                print(f"== Slurm: not run ({e})")
                return
            try:
                sq.append(slurm_queued(s, pendings, args.threads, args.window))
                s.cancel_all()
                sr.append(slurm_run(s, min(args.jobs, 24), args.threads))
            finally:
                s.stop()
        print("== Slurm (sbatch from the same process's threads)")
        mine = results["this"]
        for depth in sorted(pendings):
            rate = med([q[depth] for q in sq])
            shown = min(depth, SLURM_MAX_PENDING)
            line = f"queued, {shown:>6} pending, {args.threads} threads: {rate:8.0f} jobs/s"
            if "queued" in mine:
                ours = med([q[0][depth][0] for q in mine["queued"]])
                line += f"; ltd / Slurm {ours / rate:.1f}x"
            print(line)
        rate = med(sr)
        line = f"run to the end, {args.threads} threads: {rate:8.2f} jobs/s"
        if f"run{args.threads}" in mine:
            line += f"; ltd / Slurm {med([x[0] for x in mine[f'run{args.threads}']]) / rate:.0f}x"
        print(line)


if __name__ == "__main__":
    main()
