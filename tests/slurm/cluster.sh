#!/usr/bin/env bash
# A two-node Slurm cluster on this machine, for the Slurm tests and the
# bench: one slurmctld and two slurmd (`-N $(hostname -s)`, `-N $(hostname -s)-n2`), both on
# this host at ports of their own, with auth/none and proctrack/linuxproc,
# everything (slurm.conf, state, spool, logs, pid files) in DIR.
#
#   cluster.sh start DIR   # prints `export SLURM_CONF=DIR/slurm.conf` once both nodes are idle
#   cluster.sh stop DIR    # stops the daemons it started (by their pid files)
#
# Exits 77 (skip) where Slurm cannot run here: not installed, not root, or
# the nodes never came up (the logs say why). Node 0 is named after this
# host, so that MASTER_ADDR (the step's first host) resolves (Slurm takes a
# node named `localhost` for this host's name, and then two nodes clash).
set -euo pipefail
cmd=${1:?usage: cluster.sh start|stop DIR}
dir=${2:?usage: cluster.sh start|stop DIR}

stop() {
  local pidfile pid
  for pidfile in "$dir"/slurmd-*.pid "$dir"/slurmctld.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

skip() {
  echo "Slurm cannot run here: $*"
  exit 77
}

free_ports() {
  /usr/bin/python3 - "$1" <<'PY'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

case $cmd in
start)
  for b in slurmctld slurmd srun sbatch sinfo; do
    command -v "$b" >/dev/null || skip "$b is missing (scripts/install-deps.sh installs slurm-wlm)"
  done
  [ "$(id -u)" = 0 ] || skip "slurmd must run as root"
  node0=$(hostname -s)
  node1=$node0-n2  # sorts after node0: Slurm orders a step's nodes by name
  getent hosts "$node0" >/dev/null || skip "this host's name $node0 does not resolve"
  mkdir -p "$dir"/state "$dir/spool-$node0" "$dir"/spool-$node1 "$dir"/log
  read -r ctld_port slurmd_port n1_port n2_port < <(free_ports 4)
  # Job ids (and so the MASTER_PORT ltrun derives from them) spread out, so
  # that clusters of concurrent test runs do not meet on one port.
  first_job=$(((RANDOM * 32768 + RANDOM) % 900000 + 1000))
  cat >"$dir/slurm.conf" <<CONF
ClusterName=ltdtest
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/none
CredType=cred/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/linear
SlurmdParameters=config_overrides
ReturnToService=2
SlurmUser=root
SlurmdUser=root
FirstJobId=$first_job
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/state/slurmctld.pid
SlurmdPidFile=$dir/state/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
InactiveLimit=0
KillWait=30
MinJobAge=300
NodeName=$node0 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$n1_port CPUs=4 State=UNKNOWN
NodeName=$node1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$n2_port CPUs=4 State=UNKNOWN
PartitionName=test Nodes=$node0,$node1 Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$dir/slurm.conf
  setsid slurmctld -D -i -f "$SLURM_CONF" </dev/null >"$dir/log/slurmctld.out" 2>&1 &
  echo $! >"$dir/slurmctld.pid"
  for node in "$node0" "$node1"; do
    setsid slurmd -D -N "$node" -f "$SLURM_CONF" </dev/null >"$dir/log/slurmd-$node.out" 2>&1 &
    echo $! >"$dir/slurmd-$node.pid"
  done
  deadline=$((SECONDS + 30))
  while [ $SECONDS -lt $deadline ]; do
    if [ "$(timeout 5 sinfo -h -N -o '%T' 2>/dev/null | grep -c '^idle$')" = 2 ]; then
      echo "export SLURM_CONF=$SLURM_CONF"
      exit 0
    fi
    sleep 0.1
  done
  tail -n 5 "$dir"/log/* || true
  stop
  skip "the two nodes were not idle within 30s (logs above)"
  ;;
stop)
  stop
  ;;
*)
  echo "usage: cluster.sh start|stop DIR" >&2
  exit 2
  ;;
esac
