#!/usr/bin/env bash
# Checks on this host what ltd promises on GPU servers (docs/gpu-kit.md), from
# the unpacked kit, as root, in under 8 minutes:
#
#   gpu-check.sh [--out DIR] [--python PATH] [--no-gpu] [--only REGEX]
#
#   --out DIR      where the report goes (default ./gpu-check-out): report.txt,
#                  summary.json, each check's log, ltd's logs and job records
#   --python PATH  the Python (with torch) for the Python checks; default the
#                  first with torch of $VIRTUAL_ENV's, $CONDA_PREFIX's,
#                  every python3 and python in PATH, and venvs' under /opt
#                  and $HOME; else the first of them
#   --no-gpu       only the checks that need no GPU
#   --only REGEX   only the checks whose names match
#
# One line a check: PASS, FAIL or SKIP, its time and why. A check whose
# prerequisite the host lacks (a GPU, Python, torch, NCCL, writable cgroups)
# is SKIP, never FAIL. Exit status: 0 without a FAIL, 1 with one, 2 when the
# script could not run (not root, a bad option).
#
# Two phases, each with its own ltd on a private socket and state dir under
# --out: "cpu" (4 logical slots, no NVML) for the checks that need no GPU,
# then "gpu" (the GPUs NVML finds). Each ltd is stopped at its phase's end;
# nothing of the run is left: no process, no job cgroup.
set -uo pipefail
KIT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export KIT

if [[ ${1:-} == --run-one ]]; then
  # One check, in a process of its own, under the caller's deadline.
  # shellcheck source=SCRIPTDIR/checks/lib.sh
  source "$KIT/checks/lib.sh"
  # shellcheck source=SCRIPTDIR/checks/cpu_checks.sh
  source "$KIT/checks/cpu_checks.sh"
  # shellcheck source=SCRIPTDIR/checks/gpu_checks.sh
  source "$KIT/checks/gpu_checks.sh"
  cd "$KIT_WORK" || fail "no work dir $KIT_WORK"
  "check_$2"
  fail "check_$2 ended without a verdict"
fi

CPU_CHECKS=(ltd_job crash_teardown hang_teardown ltrun_crash ltrun_hang gloo_ddp gloo_crash gloo_hang
  launch_ltrun launch_ltd)
GPU_CHECKS=(nvml_gpus device_isolation cuda_ltd cuda_ltrun gpu_crash gpu_leftover launch_cuda
  nccl_crash nccl_hang nccl_watchdog)
declare -A DEADLINE=([ltd_job]=60 [crash_teardown]=90 [hang_teardown]=90 [ltrun_crash]=90
  [ltrun_hang]=90 [gloo_ddp]=200 [gloo_crash]=200 [gloo_hang]=200 [launch_ltrun]=200 [launch_ltd]=200
  [nvml_gpus]=200 [device_isolation]=120 [cuda_ltd]=180 [cuda_ltrun]=180 [gpu_crash]=400
  [gpu_leftover]=300 [launch_cuda]=400 [nccl_crash]=200 [nccl_hang]=200 [nccl_watchdog]=240)
RUN_LIMIT=470  # seconds: past this, the checks not yet run are SKIP

out=./gpu-check-out
only=.
KIT_NO_GPU=0
KIT_PY=
usage() { sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; }
bad() { echo "gpu-check: $*" >&2; exit 2; }
while (($#)); do
  case $1 in
    --out|--python|--only) [[ -n ${2:-} ]] || bad "$1 needs a value; see --help" ;;&
    --out) out=$2; shift 2 ;;
    --python) KIT_PY=$2; shift 2 ;;
    --no-gpu) KIT_NO_GPU=1; shift ;;
    --only) only=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) bad "unknown option '$1'; see --help" ;;
  esac
done
[[ $(id -u) == 0 ]] || bad "run as root (ltd runs as root and starts jobs as their user)"
[[ -z $KIT_PY || ( -f $KIT_PY && -x $KIT_PY ) ]] ||
  bad "--python $KIT_PY is not an executable file; give a Python's path (e.g. /opt/venv/bin/python)"
[[ $only == . ]] || { [[ x =~ $only ]]; (($? != 2)); } || bad "--only $only is not a regular expression bash takes"
if ! mkdir -p "$out" 2>/dev/null || [[ ! -w $out ]]; then bad "cannot write to --out $out; give a directory root can write"; fi
OUT=$(cd "$out" && pwd)
rm -rf "$OUT/run" "$OUT/checks" "$OUT/report.txt" "$OUT/summary.json"
mkdir -p "$OUT/run" "$OUT/checks"
T0=$(date +%s%N)
MARK=kit-$$-$RANDOM
export KIT_NO_GPU KIT_PY

# --- what the host has ---------------------------------------------------------
KIT_PY_WHY='' KIT_PY_FROM=--python
if [[ -z $KIT_PY ]]; then
  # A GPU host's torch is often in a virtual environment: the first Python
  # that imports torch, else the first Python at all.
  cands=()
  [[ -n ${VIRTUAL_ENV:-} ]] && cands+=("$VIRTUAL_ENV/bin/python")
  [[ -n ${CONDA_PREFIX:-} ]] && cands+=("$CONDA_PREFIX/bin/python")
  mapfile -t -O ${#cands[@]} cands < <(type -ap python3 python)
  # Then virtual environments where they are usually made (the first
  # Python without torch stays the one from PATH).
  for p in /opt/*/bin/python3 /opt/*/*/bin/python3 "${HOME:-/root}"/*/bin/python3 "${HOME:-/root}"/.*/bin/python3 \
    /usr/local/bin/python3; do
    [[ -x $p ]] && cands+=("$p")
  done
  first=''
  for p in "${cands[@]}"; do
    [[ -x $p ]] || continue
    [[ -n $first ]] || first=$p
    if PYTHONPATH='' timeout 120 "$p" -c 'import torch' >/dev/null 2>&1; then KIT_PY=$p; break; fi
  done
  KIT_PY_FROM="the first with torch of: ${cands[*]}"
  if [[ -z $KIT_PY && -n $first ]]; then KIT_PY=$first KIT_PY_FROM="none with torch of: ${cands[*]}"; fi
  [[ -n $KIT_PY ]] || KIT_PY_WHY="no python3 in PATH (give one with --python)"
fi
py() { PYTHONPATH=$KIT/python timeout 120 "$KIT_PY" -c "$1" 2>&1; }
KIT_TORCH=no KIT_CUDA=no KIT_NCCL=no KIT_GRPC=no KIT_TORCH_VERSION='' KIT_TORCH_WHY='' KIT_CUDA_WHY=
if [[ -n $KIT_PY ]]; then
  if KIT_TORCH_VERSION=$(py 'import torch, torch.distributed as d; assert d.is_available(), "no torch.distributed"; print(torch.__version__)'); then
    KIT_TORCH=yes KIT_TORCH_VERSION=$(tail -1 <<<"$KIT_TORCH_VERSION")
  else
    KIT_TORCH_WHY=$(tail -1 <<<"$KIT_TORCH_VERSION")
    KIT_TORCH_VERSION=
  fi
  py 'import grpc, google.protobuf, ltd._pb.ltd_pb2_grpc' >/dev/null && KIT_GRPC=yes
  if [[ $KIT_TORCH == yes && $KIT_NO_GPU == 0 ]]; then
    cuda=$(py 'import torch, torch.distributed as d
print(torch.cuda.is_available(), torch.cuda.device_count(), d.is_nccl_available(), torch.version.cuda)')
    read -r avail count nccl_ok cuda_version <<<"$(tail -1 <<<"$cuda")"
    if [[ $avail == True ]]; then KIT_CUDA=yes
    else KIT_CUDA_WHY="torch.cuda.is_available() is False (torch built for CUDA $cuda_version, $count device(s))"; fi
    [[ $nccl_ok == True ]] && KIT_NCCL=yes
  fi
fi
export KIT_PY_WHY KIT_TORCH KIT_TORCH_WHY KIT_TORCH_VERSION KIT_CUDA KIT_CUDA_WHY KIT_NCCL KIT_GRPC

cgroup2=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo 2>/dev/null)
host_facts() {
  echo "host: $(uname -srm); glibc $(getconf GNU_LIBC_VERSION 2>/dev/null | cut -d' ' -f2)"
  echo "kit: $(head -1 "$KIT/MANIFEST" 2>/dev/null); $(sed -n 3p "$KIT/MANIFEST" 2>/dev/null)"
  echo "cgroup2: ${cgroup2:-not mounted}$([[ -n $cgroup2 && -w $cgroup2 ]] && echo ' (writable)')"
  echo "nvidia driver: $(head -1 /proc/driver/nvidia/version 2>/dev/null || echo none)"
  echo "python: ${KIT_PY:-none ($KIT_PY_WHY)}${KIT_PY:+ $(py 'import sys; print(sys.version.split()[0])') ($KIT_PY_FROM)}"
  echo "torch: ${KIT_TORCH_VERSION:-none${KIT_TORCH_WHY:+ ($KIT_TORCH_WHY)}}; CUDA ${cuda_version:-none}; NCCL $KIT_NCCL; grpcio $KIT_GRPC"
}
host_facts | tee "$OUT/host.txt"

# --- results -------------------------------------------------------------------
NAMES=() STATUS=() SECS=() WHY=() FIGS=()
FAILED=0
record() {  # NAME STATUS SECONDS WHY [FIGURES]
  NAMES+=("$1") STATUS+=("$2") SECS+=("$3") WHY+=("$4") FIGS+=("${5:-}")
  [[ $2 == FAIL ]] && FAILED=1
  printf '%-4s %-17s %6ss  %s\n' "$2" "$1" "$3" "$4${5:+ [$5]}" | tee -a "$OUT/checks/lines.txt"
}
elapsed() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }'; }
marked() {  # the pids of processes a check started that still live
  local e p
  while read -r e; do
    p=${e#/proc/}; p=${p%/environ}
    [[ $p != "$$" ]] && alive_pid "$p" && echo "$p"
  done < <(grep -lzx "LTD_KIT_MARK=$MARK" /proc/[0-9]*/environ 2>/dev/null)
}
alive_pid() { [[ -d /proc/$1 ]] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
describe() { local p; for p in "$@"; do printf '%s(%s) ' "$p" "$(cat "/proc/$p/comm" 2>/dev/null)"; done; }

# --- ltd ------------------------------------------------------------------------
LTD_PID='' LTD_SOCK='' SOCK_DIR=
start_ltd() {  # PHASE ARGS...
  local phase=$1 dir=$OUT/run/$1 t
  t=$(date +%s%N)
  shift
  mkdir -p "$dir/work"
  LTD_SOCK=$dir/ltd.sock
  if ((${#LTD_SOCK} > 100)); then SOCK_DIR=$(mktemp -d /tmp/ltd-kit.XXXXXX); LTD_SOCK=$SOCK_DIR/ltd.sock; fi
  KIT_LTD_LOG=$dir/ltd.log KIT_WORK=$dir/work
  export LTD_SOCK KIT_LTD_LOG KIT_WORK
  "$KIT/sbin/ltd" --config /dev/null --socket "$LTD_SOCK" --state-dir "$dir/state" --restore-window 0 \
    --gpu-sample-interval 200ms "$@" >"$KIT_LTD_LOG" 2>&1 </dev/null &
  LTD_PID=$!
  local end=$(( $(date +%s) + 30 ))
  until "$KIT/bin/ltctl" --socket "$LTD_SOCK" ps >/dev/null 2>&1; do
    if ! kill -0 "$LTD_PID" 2>/dev/null || (( $(date +%s) > end )); then
      record "ltd_start_$phase" FAIL "$(elapsed "$t")" "ltd did not answer within 30 s: $(tail -2 "$KIT_LTD_LOG" | tr '\n' ' ')"
      stop_ltd "$phase" quiet
      return 1
    fi
    sleep 0.1
  done
  KIT_CONTAINMENT=$(sed -n 's/.*\] containment: //p' "$KIT_LTD_LOG" | head -1)
  [[ -n $KIT_CONTAINMENT ]] || KIT_CONTAINMENT=$(sed -n 's/.*; containment: //p' "$KIT_LTD_LOG" | head -1)
  export KIT_CONTAINMENT
  record "ltd_start_$phase" PASS "$(elapsed "$t")" "ltd $LTD_PID answers on $LTD_SOCK; containment: $KIT_CONTAINMENT"
}

# Ends what a check left running: its jobs, then its own processes.
reap() {
  local id
  for id in $("$KIT/bin/ltctl" --socket "$LTD_SOCK" --json ps 2>/dev/null | awk -f "$KIT/checks/flatten.awk" |
              awk -F'\t' '$1 ~ /(^|\.)id$/ { print $2 }'); do
    "$KIT/bin/ltctl" --socket "$LTD_SOCK" kill "$id" >/dev/null 2>&1
  done
}

stop_ltd() {  # PHASE [quiet]
  local phase=$1 t why="" jobs_dir
  t=$(date +%s%N)
  [[ -n $LTD_PID ]] || return 0
  timeout 60 "$KIT/bin/ltctl" --socket "$LTD_SOCK" shutdown >/dev/null 2>&1 || why="ltctl shutdown failed; "
  local end=$(( $(date +%s) + 40 ))
  while kill -0 "$LTD_PID" 2>/dev/null && (( $(date +%s) < end )); do sleep 0.1; done
  if kill -0 "$LTD_PID" 2>/dev/null; then
    why+="ltd did not stop within 40 s of ltctl shutdown (killed); "
    kill -KILL "$LTD_PID" 2>/dev/null
  fi
  wait "$LTD_PID" 2>/dev/null
  LTD_PID=
  jobs_dir=$(sed -n 's/.*containment: cgroup, jobs under //p' "$KIT_LTD_LOG" | head -1)
  # ltd removes its cgroups (its run's and the state dir's ltd-*) when it
  # stops; what it leaves is named, then removed, so the host keeps nothing.
  local base=${jobs_dir%/run-*}
  if [[ -n $jobs_dir && -d $base ]]; then
    why+="cgroups left after ltd stopped: $(find "$base" -type d | head -3 | tr '\n' ' ')(removed now); "
    find "$base" -depth -type d -exec rmdir {} + 2>/dev/null
  fi
  [[ -n $SOCK_DIR ]] && rm -rf "$SOCK_DIR" && SOCK_DIR=
  [[ -e $LTD_SOCK ]] && why+="the socket $LTD_SOCK is left; "
  [[ ${2:-} == quiet ]] && return 0
  if [[ -n $why ]]; then record "ltd_stop_$phase" FAIL "$(elapsed "$t")" "$why"
  else record "ltd_stop_$phase" PASS "$(elapsed "$t")" "ltctl shutdown stopped ltd; no job, process or cgroup left"; fi
}

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  stop_ltd final quiet
  local left
  mapfile -t left < <(marked)
  ((${#left[@]} == 0)) || kill -KILL "${left[@]}" 2>/dev/null
}
trap cleanup EXIT
trap 'echo "gpu-check: interrupted" >&2; exit 1' INT TERM

run_check() {  # NAME
  local name=$1 t rc=0 status why figs left=()
  t=$(date +%s%N)
  [[ $name =~ $only ]] || return 0
  if (( ($(date +%s%N) - T0) / 1000000000 > RUN_LIMIT )); then
    record "$name" SKIP 0.0 "the run's 8 minutes are spent"
    return 0
  fi
  local result=$OUT/checks/$name.result figures=$OUT/checks/$name.figures
  : >"$figures"
  LTD_KIT_MARK=$MARK KIT_RESULT=$result KIT_FIGURES=$figures timeout -k 5 "${DEADLINE[$name]}" \
    "$BASH" "$KIT/gpu-check.sh" --run-one "$name" >"$OUT/checks/$name.log" 2>&1 </dev/null || rc=$?
  if [[ $rc == 124 || $rc == 137 ]]; then
    status=FAIL why="over its deadline of ${DEADLINE[$name]} s (checks/$name.log)"
  elif [[ ! -s $result ]]; then
    status=FAIL why="ended (exit $rc) without a verdict: $(tail -2 "$OUT/checks/$name.log" | tr '\n' ' ')"
  else
    IFS=$'\t' read -r status why <"$result"
  fi
  reap
  local end=$(( $(date +%s) + 20 ))
  while mapfile -t left < <(marked) && ((${#left[@]})) && (( $(date +%s) < end )); do sleep 0.2; done
  if ((${#left[@]})); then
    [[ $status == FAIL ]] || status=FAIL why="processes of the check left: $(describe "${left[@]}"); $why"
    kill -KILL "${left[@]}" 2>/dev/null
  fi
  figs=$(awk '{ printf "%s%s=%s", sep, $1, $2; sep = " " }' "$figures")
  record "$name" "$status" "$(elapsed "$t")" "$why" "$figs"
}

skip_all() {  # WHY NAMES...
  local why=$1 n
  shift
  for n in "$@"; do [[ $n =~ $only ]] && record "$n" SKIP 0.0 "$why"; done
}

# --- the run ----------------------------------------------------------------------
cd "$OUT/run" || exit 2
KIT_NGPU=0 KIT_GPU_WHY=
export KIT_NGPU KIT_GPU_WHY
if start_ltd cpu --devices 4 --nvml-library "$OUT/run/no-nvml-in-the-cpu-phase.so"; then
  for c in "${CPU_CHECKS[@]}"; do run_check "$c"; done
  stop_ltd cpu
else
  skip_all "ltd did not start (see ltd_start_cpu)" "${CPU_CHECKS[@]}"
fi

if [[ $KIT_NO_GPU == 1 ]]; then
  skip_all "--no-gpu" "${GPU_CHECKS[@]}"
# LTD_KIT_NVML_LIBRARY: another NVML for ltd (the tests' fake one), to try
# this phase where there is no GPU.
elif start_ltd gpu --gpu-leftover-mib 512 ${LTD_KIT_NVML_LIBRARY:+--nvml-library "$LTD_KIT_NVML_LIBRARY"}; then
  gpus=$(timeout 30 "$KIT/bin/ltctl" --socket "$LTD_SOCK" --json gpus | awk -f "$KIT/checks/flatten.awk")
  if [[ $(awk -F'\t' '$1 == "gpu_checks" { print $2 }' <<<"$gpus") == true ]]; then
    KIT_NGPU=$(grep -c '^slots\.[0-9]*\.gpu	.' <<<"$gpus")
  else
    KIT_GPU_WHY=$(grep -m1 -o 'GPU checks off.*' "$KIT_LTD_LOG" || echo "ltd has no GPU checks")
  fi
  echo "GPUs (NVML): $KIT_NGPU${KIT_GPU_WHY:+ ($KIT_GPU_WHY)}" | tee -a "$OUT/host.txt"
  for c in "${GPU_CHECKS[@]}"; do run_check "$c"; done
  stop_ltd gpu
else
  skip_all "ltd did not start (see ltd_start_gpu)" "${GPU_CHECKS[@]}"
fi

mapfile -t left < <(marked)
if ((${#left[@]})); then
  record nothing_left FAIL 0.0 "processes of the run left: $(describe "${left[@]}")"
else
  record nothing_left PASS 0.0 "no process of any check or job is left"
fi
total=$(elapsed "$T0")

# --- the report ---------------------------------------------------------------------
json_str() { printf '"%s"' "$(sed 's/\\/\\\\/g; s/"/\\"/g' <<<"$1" | tr -d '\000-\037')"; }
{
  printf '{\n  "mode": "%s",\n  "seconds": %s,\n  "ngpu": %s,\n' "$([[ $KIT_NO_GPU == 1 ]] && echo no-gpu || echo gpu)" "$total" "$KIT_NGPU"
  printf '  "host": {'
  sep=""
  while IFS= read -r line; do printf '%s\n    %s: %s' "$sep" "$(json_str "${line%%: *}")" "$(json_str "${line#*: }")"; sep=,; done <"$OUT/host.txt"
  printf '\n  },\n  "checks": ['
  for i in "${!NAMES[@]}"; do
    printf '%s\n    {"name": %s, "status": "%s", "seconds": %s, "why": %s, "figures_ms": {' "$([[ $i -gt 0 ]] && echo ,)" \
      "$(json_str "${NAMES[i]}")" "${STATUS[i]}" "${SECS[i]}" "$(json_str "${WHY[i]}")"
    sep=""
    for f in ${FIGS[i]}; do printf '%s%s: %s' "$sep" "$(json_str "${f%%=*}")" "${f#*=}"; sep=", "; done
    printf '}}'
  done
  printf '\n  ]\n}\n'
} >"$OUT/summary.json"
{
  echo "ltd GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), $([[ $KIT_NO_GPU == 1 ]] && echo "--no-gpu" || echo "$KIT_NGPU GPU(s)"), ${total} s"
  cat "$OUT/host.txt"
  echo
  cat "$OUT/checks/lines.txt"
  echo
  echo "PASS $(grep -c '^PASS' "$OUT/checks/lines.txt"), FAIL $(grep -c '^FAIL' "$OUT/checks/lines.txt"), SKIP $(grep -c '^SKIP' "$OUT/checks/lines.txt")"
  echo "Each check's log: checks/NAME.log; ltd's: run/PHASE/ltd.log; job records: run/PHASE/state."
} >"$OUT/report.txt"
echo "gpu-check: $(tail -2 "$OUT/report.txt" | head -1) in ${total} s; report $OUT/report.txt, summary $OUT/summary.json"
exit $FAILED
