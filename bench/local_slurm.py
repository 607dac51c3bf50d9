"""A Slurm of this machine for the benches: tests/slurm/cluster.sh's
slurmctld and two slurmd in a temp dir of their own, started, used
through SLURM_CONF, and stopped with the dir removed."""

import os
import shutil
import subprocess
import tempfile
import time

CLUSTER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "tests", "slurm", "cluster.sh")


class LocalSlurm:
    """Raises RuntimeError with cluster.sh's last line when it does not start."""

    def __init__(self, prefix="bench-slurm."):
        self.dir = tempfile.mkdtemp(prefix=prefix)
        r = subprocess.run([CLUSTER, "start", self.dir], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            self.stop()  # whatever a start cut short left running
            lines = r.stdout.strip().splitlines()
            raise RuntimeError(lines[-1] if lines else f"cluster.sh exited {r.returncode}")
        self.env = dict(os.environ, SLURM_CONF=f"{self.dir}/slurm.conf")

    def sbatch(self, *args):
        """The job id of `sbatch --parsable -o /dev/null ARGS`."""
        r = subprocess.run(["sbatch", "--parsable", "-o", "/dev/null", *args],
                           env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"sbatch: {r.stderr.strip()}")
        return r.stdout.strip().split(";")[0]

    def cancel_all(self, timeout=60):
        """scancel of every job, then waits (up to `timeout`) for squeue to list none."""
        subprocess.run(["scancel", "--user", "root"], env=self.env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = subprocess.run(["squeue", "-h", "-o", "%i"], env=self.env,
                               stdout=subprocess.PIPE, text=True)
            if not r.stdout.strip():
                return
            time.sleep(0.2)

    def stop(self):
        subprocess.run([CLUSTER, "stop", self.dir])
        shutil.rmtree(self.dir, ignore_errors=True)
