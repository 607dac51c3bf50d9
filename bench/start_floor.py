"""The floor under any launcher's jobs a second: process starts on this
machine with no launcher at all. /bin/true is spawned (posix_spawn) and
reaped in a loop from one or more processes; optionally beside processes
that only spin in user space, making no system call, as a launcher's own
work keeps the other cores busy while its jobs start."""

import os
import resource
import time

CLK = os.sysconf("SC_CLK_TCK")


def machine_busy_seconds():
    """CPU seconds every core spent on anything but idle and I/O wait."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / CLK


def _child(w, seconds):
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        os.waitpid(os.posix_spawn("/bin/true", ["/bin/true"], {}), 0)
        n += 1
    used = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        used += r.ru_utime + r.ru_stime
    os.write(w, f"{n} {used}".encode())


def _spin(stop_r):
    os.set_blocking(stop_r, False)
    while True:
        for _ in range(200_000):
            pass
        try:
            if os.read(stop_r, 1) == b"":
                return
        except BlockingIOError:
            pass


def bench_floor(workers, seconds, spinners=0):
    """(starts/s, ms of the machine's CPU a start, ms of the spawners' own
    CPU a start): `workers` processes spawning for `seconds`, beside
    `spinners` that only spin. The machine's CPU counts the spinners too."""
    stop_r, stop_w = os.pipe()
    spinning = []
    for _ in range(spinners):
        pid = os.fork()
        if pid == 0:
            try:  # the child never returns into the parent's code
                os.close(stop_w)
                _spin(stop_r)
            finally:
                os._exit(0)
        spinning.append(pid)
    os.close(stop_r)
    pipes = []
    for _ in range(workers):
        r, w = os.pipe()
        if os.fork() == 0:
            try:
                os.close(r)
                _child(w, seconds)
            finally:
                os._exit(0)
        os.close(w)
        pipes.append(r)
    busy0, t0 = machine_busy_seconds(), time.monotonic()
    starts, own = 0, 0.0
    for r in pipes:
        with os.fdopen(r, "rb") as f:
            n, used = (f.read() or b"0 0").split()
            starts, own = starts + int(n), own + float(used)
    took, busy = time.monotonic() - t0, machine_busy_seconds() - busy0
    os.close(stop_w)  # the spinners see EOF and end
    for _ in range(workers + spinners):
        os.wait()
    per = 1000 / max(starts, 1)
    return starts / took, busy * per, own * per
