#!/usr/bin/env bash
# Runs examples/train (or any program) as an N-rank job on this host with
# the environment torchrun and ltd give each rank, without ltd: for trying
# the trainer and its fault injection by hand. Each output line is prefixed
# with its rank, and every rank's exit status is reported as it exits.
#
#   run_local.sh [-n RANKS] [-t SECONDS] [-H DIR] [-b BINARY] [--] [TRAIN ARGS...]
#
#   -n RANKS    number of ranks (default 4)
#   -t SECONDS  SIGTERM every rank still running after this long (exit 124,
#               the code ltd gives a hang); 0 = no limit (default)
#   -H DIR      open fd 3 of rank R onto DIR/rank-R.hb and set
#               LT_HEARTBEAT_FD=3, to see the heartbeat lines libltworker sends
#   -b BINARY   the program (default: $TRAIN, else build/examples/train)
#
# Exit status: that of the first rank to fail, 0 if none did.
# Examples:
#   run_local.sh -n 4 -- --steps 200
#   run_local.sh -n 4 -t 60 -- --crash-rank 2 --crash-step 5
#   run_local.sh -n 4 -t 20 -- --hang-rank 1 --hang-step 5
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nranks=4
deadline=0
hb_dir=""
train=${TRAIN:-$here/../../build/examples/train}

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while getopts "n:t:H:b:h" opt; do
  case $opt in
    n) nranks=$OPTARG ;;
    t) deadline=$OPTARG ;;
    H) hb_dir=$OPTARG ;;
    b) train=$OPTARG ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[[ $nranks =~ ^[1-9][0-9]*$ ]] || { echo "run_local: -n wants a positive count" >&2; exit 2; }
[[ $deadline =~ ^[0-9]+$ ]] || { echo "run_local: -t wants whole seconds" >&2; exit 2; }
[[ -x $train ]] || { echo "run_local: $train is not an executable; build it or pass -b" >&2; exit 2; }
[[ -z $hb_dir ]] || mkdir -p "$hb_dir"

# A port free right now; the window until rank 0 binds it is tiny.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
    2>/dev/null || echo $((20000 + RANDOM % 40000))
}
port=${MASTER_PORT:-$(free_port)}

launcher=()
((deadline == 0)) || launcher=(timeout --signal=TERM --kill-after=5 "$deadline")

declare -A rank_of=()  # pid -> rank, for the ranks not yet reaped
# Whatever ends this script (Ctrl-C, an outer timeout) ends the ranks too,
# and reaps them: SIGTERM, up to 5 s, then SIGKILL.
# shellcheck disable=SC2317  # called by the trap below
cleanup() {
  ((${#rank_of[@]} > 0)) || return 0
  kill -TERM "${!rank_of[@]}" 2>/dev/null || true
  for _ in {1..50}; do
    [[ -n $(jobs -rp) ]] || break
    sleep 0.1
  done
  kill -KILL "${!rank_of[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "run_local: $nranks ranks of $train, MASTER_ADDR=127.0.0.1 MASTER_PORT=$port" >&2
for ((r = 0; r < nranks; r++)); do
  (
    if [[ -n $hb_dir ]]; then
      exec 3>"$hb_dir/rank-$r.hb"
      export LT_HEARTBEAT_FD=3
    fi
    export RANK=$r LOCAL_RANK=$r WORLD_SIZE=$nranks LOCAL_WORLD_SIZE=$nranks \
      GROUP_RANK=0 NODE_RANK=0 ROLE_RANK=$r ROLE_WORLD_SIZE=$nranks GROUP_WORLD_SIZE=1 \
      ROLE_NAME=default MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      TORCHELASTIC_RUN_ID=run_local TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0 \
      OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} PYTHONFAULTHANDLER=1
    exec "${launcher[@]}" "$train" "$@"
  ) > >(sed -u "s/^/[$r] /") 2> >(sed -u "s/^/[$r] /" >&2) &
  rank_of[$!]=$r
done

first_rc=0
while ((${#rank_of[@]} > 0)); do
  rc=0
  # 2>/dev/null: bash would print its own "Aborted ..." line for a signal death.
  { wait -n -p pid "${!rank_of[@]}" || rc=$?; } 2>/dev/null
  r=${rank_of[$pid]}
  unset "rank_of[$pid]"
  if ((rc == 124)); then
    echo "run_local: rank $r exited 124 (killed after ${deadline}s)" >&2
  elif ((rc > 128)); then
    echo "run_local: rank $r exited $rc (signal $((rc - 128)))" >&2
  else
    echo "run_local: rank $r exited $rc" >&2
  fi
  ((first_rc != 0)) || first_rc=$rc
done
wait  # for the output prefixers to drain
exit "$first_rc"
