"""torchrun's command lines, as public training repositories write them, run
with `ltrun` in torchrun's place: each a 2-rank job of check_rank.py, whose
ranks write what they were given (RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR/PORT, TORCHELASTIC_*, argv, how Python started them); each case
then checks that and the options' effects (log files, console filters,
restarts, signals, refusals).

usage: corpus_test.py LTRUN
Each case names where its form comes from. Nothing is left behind: every
case's directory is removed, and ltrun is waited for (60 s at most).
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LTRUN = sys.argv[1] if len(sys.argv) > 1 else "ltrun"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Case:
    def __init__(self, name, source, argv, env=None, expect=None, check=None, do="",
                 exit_code=0, ranks=2, during=None):
        self.name, self.source, self.argv = name, source, argv
        self.env = env or {}
        self.expect = expect or {}
        self.check = check
        self.do = do
        self.exit_code = exit_code
        self.ranks = ranks
        self.during = during  # called with (process, dir) while it runs


def records(d, attempt="0"):
    out = {}
    for name in os.listdir(d):
        if name.startswith("rank-") and name.endswith(f"-{attempt}.json"):
            with open(os.path.join(d, name)) as f:
                r = json.load(f)
            out[int(r["env"]["RANK"])] = r
    return out


def wait_for(cond, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def run_case(case):
    d = tempfile.mkdtemp(prefix="ltrun-corpus.")
    try:
        shutil.copy(os.path.join(HERE, "check_rank.py"), os.path.join(d, "train.py"))
        os.makedirs(os.path.join(d, "ltcheck"))
        open(os.path.join(d, "ltcheck", "__init__.py"), "w").close()
        shutil.copy(os.path.join(HERE, "check_rank.py"), os.path.join(d, "ltcheck", "train.py"))
        exe = os.path.join(d, "train_exec")
        with open(exe, "w") as f:
            f.write("#!/usr/bin/python3 -u\n")
            f.write(open(os.path.join(HERE, "check_rank.py")).read())
        os.chmod(exe, 0o755)
        env = {"PATH": "/usr/bin:/bin", "HOME": d, "LT_CHECK_DIR": d, "LT_CHECK_DO": case.do,
               "TMPDIR": d}
        env.update({k: v.replace("{dir}", d) for k, v in case.env.items()})
        argv = [LTRUN] + [a.replace("{dir}", d) for a in case.argv]
        p = subprocess.Popen(argv, cwd=d, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, errors="replace")
        if case.during:
            case.during(p, d)
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            return [f"ltrun did not end within 60 s: {err[-500:]}"]
        problems = []
        if (p.returncode == 0 if case.exit_code is None else p.returncode != case.exit_code):
            problems.append(f"exit code {p.returncode}, want {case.exit_code}: {err.strip()[-600:]}")
            return problems
        if case.ranks and (case.exit_code == 0 or case.do in ("crash", "crash-once")):
            got = records(d)
            if case.ranks and sorted(got) != list(range(case.ranks)):
                problems.append(f"ranks that ran: {sorted(got)}, want 0..{case.ranks - 1}")
            for rank, r in got.items():
                e = r["env"]
                want = {"RANK": str(rank), "LOCAL_RANK": str(rank),
                        "WORLD_SIZE": str(case.ranks), "LOCAL_WORLD_SIZE": str(case.ranks),
                        "TORCHELASTIC_RESTART_COUNT": "0"}
                want.update(case.expect)
                for k, v in want.items():
                    got_v = r.get(k) if k in ("argv", "orig_argv", "unbuffered", "module") else e.get(k)
                    if callable(v):
                        if not v(got_v):
                            problems.append(f"rank {rank}: {k}={got_v!r} is not as wanted")
                    elif got_v != v:
                        problems.append(f"rank {rank}: {k}={got_v!r}, want {v!r}")
                for k in ("MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
                          "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_ERROR_FILE"):
                    if not e.get(k):
                        problems.append(f"rank {rank}: no {k}")
        if case.check:
            problems += case.check(d, out, err) or []
        return problems
    finally:
        shutil.rmtree(d, ignore_errors=True)


def python_u(script):
    """The rank was started as `python3 -u SCRIPT` (torchrun's sys.executable -u)."""
    return lambda orig: bool(orig) and "-u" in orig and any(a.endswith(script) for a in orig)


def log_files(d):
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            if f in ("stdout.log", "stderr.log"):
                p = os.path.join(root, f)
                out[os.path.relpath(p, d)] = open(p, errors="replace").read()
    return out


def check_redirected(d, out, err):
    problems = []
    logs = log_files(os.path.join(d, "logs"))
    for rank in (0, 1):
        so = [v for k, v in logs.items() if k.endswith(f"attempt_0/{rank}/stdout.log")]
        se = [v for k, v in logs.items() if k.endswith(f"attempt_0/{rank}/stderr.log")]
        if not so or f"out of rank {rank}" not in so[0]:
            problems.append(f"no stdout.log of rank {rank} with its line: {sorted(logs)}")
        if not se or f"err of rank {rank}" not in se[0]:
            problems.append(f"no stderr.log of rank {rank} with its line")
    if "out of rank" in out or "err of rank" in err:
        problems.append(f"--redirects 3 left lines on the console: {out!r} {err!r}")
    return problems


def check_tee_filtered(d, out, err):
    problems = []
    logs = log_files(os.path.join(d, "logs"))
    if not any(k.endswith("attempt_0/0/stdout.log") and "out of rank 0" in v
               for k, v in logs.items()):
        problems.append(f"--tee 3 wrote no stdout.log of rank 0: {sorted(logs)}")
    if "out of rank 1" not in out or "out of rank 0" in out:
        problems.append(f"--local-ranks-filter 1 shows other ranks' lines: {out!r}")
    return problems


def check_titan(d, out, err):
    problems = []
    if "out of rank 0" not in out or "out of rank 1" in out:
        problems.append(f"--local-ranks-filter 0 shows other ranks' lines: {out!r}")
    if err.count("no effect") != 1 or "--role" not in err:
        problems.append(f"--role is not said once to have no effect: {err!r}")
    if not [k for k in log_files(d) if k.endswith("0/stdout.log")]:
        problems.append("--tee 3 wrote no log file under $TMPDIR")
    return problems


def check_no_effect(d, out, err):
    lines = [l for l in err.splitlines() if "no effect" in l]
    want = "--monitor-interval, --start_method have no effect"
    if len(lines) != 1 or want not in lines[0]:
        return [f"want one line saying {want!r}: {err!r}"]
    return []


def check_restarted(d, out, err):
    second = records(d, "1")
    if sorted(second) != [0, 1]:
        return [f"attempt 1 ranks {sorted(second)}, want 0 and 1: {err[-400:]}"]
    if any(r["env"].get("TORCHELASTIC_RESTART_COUNT") != "1" for r in second.values()):
        return ["attempt 1 is not TORCHELASTIC_RESTART_COUNT=1"]
    return []


def check_crash_named(d, out, err):
    lines = [l for l in err.splitlines() if l.startswith("ltrun: job FAILED")]
    if len(lines) != 1 or "rank 1" not in lines[0] or "exit code 3" not in lines[0]:
        return [f"the failure line does not name rank 1: {err!r}"]
    return []


def one_line(*needles):
    def check(d, out, err):
        lines = err.strip().splitlines()
        if len(lines) != 1 or any(n not in lines[0] for n in needles):
            return [f"want one line with {needles}: {err!r}"]
        return []
    return check


def send_after_ready(sig):
    def during(p, d):
        ok = wait_for(lambda: len([n for n in os.listdir(d) if n.startswith("rank-")]) == 2, 30)
        p.send_signal(sig if ok else signal.SIGKILL)
    return during


def cases():
    port = free_port()
    port2 = free_port()
    u = python_u("train.py")
    return [
        # PyTorch tutorial "Getting Started with Distributed Data Parallel"
        # (ddp_tutorial.rst), elastic_ddp.py's line.
        Case("ddp-tutorial-elastic", "pytorch/tutorials ddp_tutorial.rst",
             ["--nnodes=1", "--nproc_per_node=2", "--rdzv_id=100", "--rdzv_backend=c10d",
              "--rdzv_endpoint=localhost:29400", "train.py"],
             expect={"TORCHELASTIC_RUN_ID": "100", "orig_argv": u, "unbuffered": True}),
        # pytorch/examples distributed/ddp-tutorial-series/README: multigpu_torchrun.py
        Case("ddp-series-standalone", "pytorch/examples ddp-tutorial-series",
             ["--standalone", "--nproc_per_node=2", "train.py", "50", "10"],
             expect={"argv": ["50", "10"], "orig_argv": u}),
        # PyTorch docs, torchrun (elastic/run.html): "Single-node multi-worker".
        Case("torchrun-docs-single-node", "pytorch docs torchrun.rst",
             ["--standalone", "--nnodes=1", "--nproc-per-node=2", "train.py"],
             expect={"orig_argv": u}),
        # PyTorch docs, torchrun: "--nnodes=$NUM_NODES ... --rdzv-backend=c10d"
        # on one node, dashed spellings.
        Case("torchrun-docs-c10d-dashed", "pytorch docs torchrun.rst",
             ["--nnodes=1", "--nproc-per-node=2", "--max-restarts=3", "--rdzv-id=JOB",
              "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:29400", "train.py"],
             expect={"TORCHELASTIC_RUN_ID": "JOB", "TORCHELASTIC_MAX_RESTARTS": "3"}),
        # torchtitan run_train.sh: NGPU, LOG_RANK, TRAIN_FILE as a module, --tee 3.
        Case("torchtitan-run-train", "pytorch/torchtitan run_train.sh",
             ["--nproc_per_node=2", "--rdzv_backend", "c10d", "--rdzv_endpoint=localhost:0",
              "--local-ranks-filter", "0", "--role", "rank", "--tee", "3", "-m",
              "ltcheck.train", "--job.config_file", "debug_model.toml"],
             expect={"module": "ltcheck.train", "argv": ["--job.config_file", "debug_model.toml"],
                     "orig_argv": lambda o: o[1:3] == ["-u", "-m"]},
             check=check_titan),
        # torchtitan's older run_llama_train.sh: a script, --local_ranks_filter.
        Case("torchtitan-llama-script", "pytorch/torchtitan run_llama_train.sh (2024)",
             ["--nproc_per_node=2", "--rdzv_backend", "c10d", "--rdzv_endpoint=localhost:0",
              "--local_ranks_filter", "1", "--role", "rank", "--tee", "3", "train.py",
              "--job.config_file", "x.toml"],
             env={"PET_LOG_DIR": "{dir}/logs"}, check=check_tee_filtered),
        # Lightning docs, "Run on an on-prem cluster (intermediate)": torchrun
        # with --master_addr/--master_port/--node_rank.
        Case("lightning-cluster", "Lightning docs clouds/cluster_intermediate_2",
             ["--nproc_per_node=2", "--nnodes=1", "--node_rank", "0", "--master_addr",
              "127.0.0.1", "--master_port", str(port), "train.py", "--trainer.devices=2"],
             expect={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "NODE_RANK": "0"}),
        # Lightning Fabric docs "Launch with torchrun".
        Case("fabric-torchrun", "Lightning docs fabric/fundamentals/launch",
             ["--nproc-per-node=2", "train.py"], expect={"orig_argv": u}),
        # Kubeflow training-operator PyTorchJob: PET_* set by the operator,
        # the container runs `torchrun train.py`.
        Case("kubeflow-pytorchjob", "kubeflow/training-operator pytorch elastic env",
             ["train.py", "--epochs", "1"],
             env={"PET_NPROC_PER_NODE": "2", "PET_NNODES": "1", "PET_NODE_RANK": "0",
                  "PET_MASTER_ADDR": "localhost", "PET_MASTER_PORT": str(port2)},
             expect={"MASTER_ADDR": "localhost", "MASTER_PORT": str(port2),
                     "argv": ["--epochs", "1"]}),
        # Kubeflow Trainer v2 TrainJob (torch runtime): PET_NNODES and
        # PET_NPROC_PER_NODE, PET_MASTER_* and PET_NODE_RANK.
        Case("kubeflow-trainjob", "kubeflow/trainer torch-distributed runtime",
             ["train.py"],
             env={"PET_NNODES": "1", "PET_NPROC_PER_NODE": "2", "PET_NODE_RANK": "0",
                  "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": str(port2)},
             expect={"MASTER_PORT": str(port2)}),
        # Kubeflow elastic PyTorchJob: rendezvous env (one node here).
        Case("kubeflow-elastic-env", "kubeflow/training-operator elastic example",
             ["train.py"],
             env={"PET_NPROC_PER_NODE": "2", "PET_NNODES": "1:1", "PET_RDZV_BACKEND": "c10d",
                  "PET_RDZV_ENDPOINT": "localhost:29400", "PET_RDZV_ID": "elastic-job"},
             expect={"TORCHELASTIC_RUN_ID": "elastic-job"}),
        # Hugging Face transformers examples README: torchrun --nproc_per_node N script.
        Case("transformers-examples", "huggingface/transformers examples/pytorch/README",
             ["--nproc_per_node", "2", "train.py", "--model_name_or_path", "bert-base-cased"],
             expect={"argv": ["--model_name_or_path", "bert-base-cased"]}),
        # Megatron-LM examples: DISTRIBUTED_ARGS with --nnodes 1:1 form.
        Case("megatron-distributed-args", "NVIDIA/Megatron-LM examples/gpt3 train_gpt3",
             ["--nproc_per_node", "2", "--nnodes", "1:1", "--node_rank", "0", "--master_addr",
              "localhost", "--master_port", str(port), "train.py"],
             expect={"MASTER_PORT": str(port)}),
        # torch.distributed.launch's habit: python -m torch.distributed.run.
        Case("python-m-distributed-run", "pytorch docs distributed.rst (launch utility)",
             ["--nproc_per_node=2", "--master_port=" + str(port), "train.py"],
             expect={"MASTER_PORT": str(port)}),
        # --max-restarts: a rank fails once; the group restarts whole.
        Case("max-restarts", "pytorch docs torchrun.rst (fault tolerance)",
             ["--nproc-per-node=2", "--max_restarts=1", "train.py"], do="crash-once",
             expect={"TORCHELASTIC_MAX_RESTARTS": "1"}, check=check_restarted),
        # --no-python: an executable (torchrun's docs: not a Python script).
        Case("no-python", "pytorch docs torchrun.rst --no-python",
             ["--nproc-per-node=2", "--no-python", "./train_exec", "a"],
             expect={"argv": ["a"]}),
        # --run-path: an absolute script path.
        Case("run-path", "pytorch docs torchrun.rst --run-path",
             ["--nproc_per_node=2", "--run_path", "{dir}/train.py"],
             expect={"orig_argv": python_u("/train.py")}),
        # --log-dir with --redirects 3: files only, not the console.
        Case("log-dir-redirects", "pytorch docs elastic/multiprocessing (redirects)",
             ["--nproc-per-node=2", "--log-dir={dir}/logs", "--redirects=3", "train.py"],
             check=check_redirected),
        # options without effect, said once.
        Case("no-effect-options", "pytorch docs torchrun.rst (--monitor-interval)",
             ["--nproc-per-node=2", "--monitor-interval", "1", "--start_method=spawn",
              "train.py"], check=check_no_effect),
        # --signals-to-handle: SIGUSR1 (Slurm's habit) tears the job down.
        Case("signals-to-handle", "pytorch run.py --signals-to-handle (SLURM note)",
             ["--nproc-per-node=2", "--signals-to-handle=SIGTERM,SIGUSR1",
              "--shutdown-timeout=5", "train.py"], do="wait", exit_code=None,
             during=send_after_ready(signal.SIGUSR1), ranks=0),
        # static rendezvous through --rdzv-endpoint (torchrun's get_rdzv_endpoint).
        Case("static-endpoint", "pytorch run.py static rdzv endpoint",
             ["--nproc-per-node=2", "--rdzv-backend=static",
              f"--rdzv-endpoint=127.0.0.1:{port}", "train.py"],
             expect={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}),
        # A rank's crash: the failure line names the rank.
        Case("crash-named", "any torchrun line; a rank exits 3",
             ["--standalone", "--nproc-per-node=2", "train.py"], do="crash", exit_code=3,
             check=check_crash_named),
        # An elastic range: refused in one line that says what ltd does.
        Case("elastic-refused", "pytorch docs torchrun.rst elastic (min:max)",
             ["--nnodes=1:4", "--nproc-per-node=2", "--rdzv-backend=c10d",
              "--rdzv-endpoint=localhost:29400", "train.py"], exit_code=1, ranks=0,
             check=one_line("elastic run of 1 to 4 nodes", "give --nnodes 4")),
        # A typo: one line, with what was meant.
        Case("typo-did-you-mean", "a user's typo of torchrun's option",
             ["--nproc_per_nod=2", "train.py"], exit_code=1, ranks=0,
             check=one_line("unknown option --nproc_per_nod", "did you mean --nproc-per-node?")),
    ]


def main():
    failed = 0
    for case in cases():
        started = time.monotonic()
        problems = run_case(case)
        took = time.monotonic() - started
        status = "ok" if not problems else "FAIL"
        print(f"{status} {case.name} ({case.source}; {took:.1f} s)")
        for p in problems:
            print(f"    {p}")
        failed += bool(problems)
    print(f"{len(cases()) - failed} of {len(cases())} torchrun command lines ran as torchrun's")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
