# shellcheck shell=bash
# The checks on real GPUs, under the ltd of the GPU phase (its slots are
# the GPUs NVML finds; NVML through libnvidia-ml.so.1). GPU indices are
# NVML's (PCI bus order); CUDA is told the same order so that a process
# outside ltd names the same GPU.
export CUDA_DEVICE_ORDER=PCI_BUS_ID

logs_have() { [[ $(ctl logs "$1" 2>/dev/null) == *"$2"* ]]; }

# The driver's view of the GPUs and their device nodes; the kit's test
# points these at a stand-in tree (nodes of the driver's major, no driver
# behind them: opening one the cgroup allows gives ENXIO, not success).
NVIDIA_PROC=${LTD_KIT_NVIDIA_PROC:-/proc/driver/nvidia}
NVIDIA_DEV=${LTD_KIT_NVIDIA_DEV:-/dev}

gpu_dirs() { find "$NVIDIA_PROC/gpus" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | sort; }
# The minor of GPU $1 (NVML index): $NVIDIA_PROC/gpus/*/information in PCI
# bus order, which is NVML's.
gpu_minor() {
  local dirs
  mapfile -t dirs < <(gpu_dirs)
  [[ -n ${dirs[$1]:-} ]] || return 1
  sed -n 's/^Device Minor:[[:space:]]*\([0-9]*\).*/\1/p' "${dirs[$1]}/information"
}

job_gpu_mib_at_least() { local v; v=$(show_flat "$1" | jget gpus.0.memory_used_mib); ((${v:-0} >= $2)); }
slot_is() { [[ $(slot_state "$1") == "$2" ]]; }
gpu_used_at_most() { local v; v=$(gpu_used "$1"); [[ -n $v ]] && ((v <= $2)); }

check_nvml_gpus() {
  need_gpus 1
  local g total n proc_n
  g=$(ctl --json gpus | flat)
  [[ $(jget gpu_checks <<<"$g") == true ]] || fail "ltd has no GPU checks: $(grep -m1 'GPU checks off' "$KIT_LTD_LOG")"
  n=$(grep -c '^slots\.[0-9]*\.gpu	' <<<"$g")
  proc_n=$(gpu_dirs | wc -l)
  [[ $n == "$KIT_NGPU" ]] || fail "ltctl gpus lists $n GPUs, NVML counted $KIT_NGPU"
  [[ $proc_n == 0 || $proc_n == "$n" ]] || fail "ltctl gpus lists $n GPUs, $NVIDIA_PROC/gpus has $proc_n"
  local minors="" m want
  for ((i = 0; i < n; i++)); do
    total=$(jget "slots.$i.usage.memory_total_mib" <<<"$g")
    [[ ${total:-0} -gt 0 ]] || fail "GPU $(jget "slots.$i.gpu" <<<"$g") has no memory total: $(grep "^slots\.$i\." <<<"$g" | tr '\n' ' ')"
    m=$(jget "slots.$i.minor" <<<"$g")
    [[ -n $m ]] || fail "ltctl gpus gives GPU $(jget "slots.$i.gpu" <<<"$g") no minor"
    want=$(gpu_minor "$(jget "slots.$i.gpu" <<<"$g")" 2>/dev/null || true)
    [[ -z $want || $m == "$want" ]] || fail "ltctl gpus says GPU $i is /dev/nvidia$m, the driver says /dev/nvidia$want"
    minors+="${minors:+,}$m"
  done
  [[ ${KIT_CUDA:-} == yes ]] ||
    pass "$n GPU(s) listed with memory totals and minors $minors (a job's GPU not checked: no CUDA in ${KIT_PY:-any Python})"
  # A job's GPU shows its job, and its memory in the job's record.
  local rel=$KIT_WORK/nvml.release id used
  id=$(submit_d --devices 1 --name kit-nvml -- "$KIT_PY" "$KIT/checks/cuda_rank.py" --mib 1024 --hold-until "$rel") ||
    fail "submit failed"
  wait_for 120 logs_have "$id" "cuda ok" || { touch "$rel"; fail "the CUDA rank never got going: $(ctl logs "$id" | tail -3)"; }
  wait_for 10 job_gpu_mib_at_least "$id" 1000 ||
    { touch "$rel"; fail "ltctl show does not see the rank's 1 GiB: $(show_flat "$id" | grep '^gpus' | tr '\n' ' ')"; }
  used=$(show_flat "$id" | jget gpus.0.memory_used_mib)
  local gpu
  gpu=$(show_flat "$id" | jget gpus.0.gpu)
  [[ $(slot_state "$gpu") == BUSY ]] || { touch "$rel"; fail "GPU $gpu is not BUSY while job $id runs on it"; }
  local pid
  pid=$(show_flat "$id" | jget ranks.0.pid)
  wait_for 5 gpu_lists_pid "$gpu" "$pid" ||
    { touch "$rel"; fail "ltctl gpus does not list the rank's pid $pid on GPU $gpu: $(ctl gpus)"; }
  touch "$rel"
  wait_for 60 job_ended "$id" || fail "job $id did not end"
  [[ $(job_state "$id") == SUCCEEDED ]] || fail "job $id: $(job_state "$id"): $(show_flat "$id" | cause_of /dev/stdin)"
  pass "$n GPU(s) with memory totals and minors $minors; job $id's GPU $gpu BUSY, its rank (pid $pid) listed on it, ${used} MiB used seen"
}

check_gpu_leftover() {
  need_gpus 1
  need_cuda
  local rel=$KIT_WORK/leftover.release id gpu holder
  id=$(submit_d --devices 1 --name kit-left -- "$KIT_PY" "$KIT/checks/cuda_rank.py" --mib 256 --hold-until "$rel")
  wait_for 120 logs_have "$id" "cuda ok" || { touch "$rel"; fail "the CUDA rank never got going"; }
  gpu=$(show_flat "$id" | jget cuda_visible_devices)
  # A process outside any job takes 1 GiB of the job's GPU while it runs.
  CUDA_VISIBLE_DEVICES=$gpu RANK=0 "$KIT_PY" "$KIT/checks/cuda_rank.py" --mib 1024 --hold-until "$KIT_WORK/holder.release" \
    >"$KIT_WORK/holder.log" 2>&1 &
  holder=$!
  wait_for 120 grep -q "cuda ok" "$KIT_WORK/holder.log" || { kill $holder; touch "$rel"; fail "the holder outside ltd never got going: $(tail -2 "$KIT_WORK/holder.log")"; }
  touch "$rel"
  wait_for 60 job_ended "$id" || { kill $holder; fail "job $id did not end"; }
  wait_for 15 slot_is "$gpu" QUARANTINED ||
    { kill $holder; fail "GPU $gpu is $(slot_state "$gpu") with pid $holder holding 1 GiB on it; want QUARANTINED"; }
  ctl gpus | grep -q "pid $holder" || { kill $holder; fail "ltctl gpus does not name the holder pid $holder: $(ctl gpus)"; }
  touch "$KIT_WORK/holder.release"
  wait "$holder"
  wait_for 30 slot_is "$gpu" FREE || fail "GPU $gpu is $(slot_state "$gpu") after the holder left; want FREE"
  pass "GPU $gpu QUARANTINED while pid $holder (outside any job) held 1 GiB, named by ltctl gpus, FREE once it left"
}

# A job that opens each of $NODES, one line a node: "open NODE ok" or
# "open NODE refused: STRERROR". Each open in a subshell (a failed
# redirection of a special builtin ends a POSIX shell); the error's last
# words say why it failed.
# shellcheck disable=SC2016 # expanded by the rank's shell
PROBE='echo gpu $CUDA_VISIBLE_DEVICES; for n in $NODES; do if e=$( (true <>"$n") 2>&1); then echo "open $n ok"; else echo "open $n refused: ${e##*: }"; fi; done'
probe_job() {  # NAME NODES...
  local name=$1
  shift
  NODES="$*" timeout 60 "${CTL[@]}" submit --devices 1 --name "$name" -- /bin/sh -c "$PROBE" 2>&1
}
# The probe's line for node $1 in $2 says the job opened it (with the
# stand-in nodes: the cgroup let the open through to a missing driver).
opened() {
  grep -qxF "[0] open $1 ok" <<<"$2" ||
    { [[ -n ${LTD_KIT_NVIDIA_DEV:-} ]] && grep -qxF "[0] open $1 refused: No such device or address" <<<"$2"; }
}
eperm() { grep -qxF "[0] open $1 refused: Operation not permitted" <<<"$2"; }
probe_line() { grep -m1 -F "open $1 " <<<"$2" || echo "no line for $1"; }

check_device_isolation() {
  need_gpus 1
  local iso
  iso=$(ctl --json gpus | flat | jget gpu_isolation)
  [[ $iso == isolated* ]] || skip "ltd says GPU isolation is off here: ${iso:-(nothing)} ($KIT_CONTAINMENT)"
  local minors=() nodes=() out mine m i others=() spare major node="" e
  for ((i = 0; i < KIT_NGPU; i++)); do
    m=$(gpu_minor "$i") || m=""
    [[ -n $m ]] || skip "no $NVIDIA_PROC/gpus/*/information for GPU $i to learn its minor from"
    minors+=("$m") nodes+=("$NVIDIA_DEV/nvidia$m")
  done
  if ((KIT_NGPU == 1)); then
    # No second GPU to be refused: a node of the driver's major for a minor
    # no GPU has stands in for one (the job may open only its GPUs' minors).
    major=$(( 0x$(stat -c %t "${nodes[0]}" 2>/dev/null || echo 0) ))
    ((major > 0)) || skip "no device node ${nodes[0]} for GPU 0"
    spare=$(( minors[0] == 0 ? 1 : 0 ))
    # In the work dir, else (a nodev mount) in /dev; removed when the check
    # ends (SPARE_NODE is global: the EXIT trap reads it).
    local where why=""
    trap 'rm -f "${SPARE_NODE:-}"' EXIT
    for where in "$KIT_WORK" "$NVIDIA_DEV"; do
      SPARE_NODE=$where/ltd-kit-spare-nvidia$spare.$$
      node=$SPARE_NODE
      if ! mknod "$node" c "$major" "$spare" 2>/dev/null; then why+="no node could be made in $where; "; node=""; continue; fi
      # Outside a job the driver may refuse a minor it lacks (ENXIO,
      # ENODEV), but nothing may deny it: EPERM in the job is the cgroup's.
      if ! e=$( (true <>"$node") 2>&1); then
        case ${e##*: } in
          "Operation not permitted"|"Permission denied")
            why+="$node is denied outside a job too (${e##*: }: a nodev mount?); "; rm -f "$node"; node=""; continue ;;
        esac
      fi
      break
    done
    [[ -n $node ]] || skip "one GPU, and no node to stand in for a second: $why"
    nodes+=("$node")
  fi
  out=$(probe_job kit-iso "${nodes[@]}") || fail "the probe job failed: $out"
  note "$out"
  i=$(sed -n 's/^\[0\] gpu \([0-9]*\)$/\1/p' <<<"$out")
  [[ -n $i && -n ${nodes[i]:-} ]] || fail "the job's CUDA_VISIBLE_DEVICES is not one GPU index: $(head -1 <<<"$out")"
  mine=${nodes[i]}
  opened "$mine" "$out" || fail "the job cannot open its own GPU's $mine: $(probe_line "$mine" "$out")"
  for m in "${nodes[@]}"; do
    [[ $m == "$mine" ]] && continue
    eperm "$m" "$out" || fail "the job on $mine is not refused (EPERM) $m: $(probe_line "$m" "$out")"
    others+=("$m")
  done
  pass "a 1-GPU job opens its $mine and gets EPERM on ${others[*]}$([[ -n $node ]] && echo " (a stand-in node for a minor no GPU has)"); $iso"
}

check_cuda_ltd() {
  need_gpus 1
  need_cuda
  local out
  out=$(timeout 180 "${CTL[@]}" submit --devices 1 --name kit-cuda -- "$KIT_PY" "$KIT/checks/cuda_rank.py" --mib 1024 2>&1) ||
    fail "the CUDA rank failed under ltd (exit $?): $(tail -3 <<<"$out")"
  pass "$(grep -m1 'cuda ok' <<<"$out" | sed 's/^\[0\] //')"
}

check_cuda_ltrun() {
  need_gpus 1
  need_cuda
  local out
  out=$(CUDA_VISIBLE_DEVICES=0 timeout 180 "$KIT/bin/ltrun" --devices 1 -- "$KIT_PY" "$KIT/checks/cuda_rank.py" --mib 1024 2>&1) ||
    fail "the CUDA rank failed under ltrun (exit $?): $(tail -3 <<<"$out")"
  pass "ltrun: $(grep -m1 'cuda ok' <<<"$out" | sed 's/^\[0\] //')"
}

check_gpu_crash() {
  need_gpus 1
  need_cuda
  local n=$(( KIT_NGPU >= 2 ? 2 : 1 )) log=$KIT_WORK/gpu-crash.log rec=$KIT_WORK/gpu-crash.flat rc=0
  local ready=$KIT_WORK/gpu-crash.ready crash back gpus g before=() base
  mkdir -p "$ready"
  for g in $(gpu_memory | awk '{ print $1 }'); do before[g]=$(gpu_used "$g"); done
  timeout 180 "${CTL[@]}" submit --devices $n --name kit-gpu-crash -- "$KIT_PY" "$KIT/checks/cuda_rank.py" --mib 4096 \
    --crash-rank $((n - 1)) --ready-dir "$ready" >"$log" 2>&1 || rc=$?
  ctl --json show kit-gpu-crash | flat >"$rec"
  [[ $rc == 139 && $(jget root_cause.rank <"$rec") == $((n - 1)) ]] ||
    fail "exit code $rc; want rank $((n - 1))'s SIGSEGV as the root cause: $(cause_of "$rec")"
  mapfile -t pids < <(rank_pids "$rec")
  wait_for 5 none_alive "${pids[@]}" || fail "ranks alive after the teardown: ${pids[*]}"
  crash=$(to_ms "$(event_at crash "$log")")
  figure crash_to_every_rank_gone_ms $(( $(to_ms "$(jget ended_at <"$rec")") - crash ))
  gpus=$(jget cuda_visible_devices <"$rec")
  for g in ${gpus//,/ }; do
    base=${before[g]:-0}
    wait_for 60 gpu_used_at_most "$g" $((base + 256)) ||
      fail "GPU $g still has $(gpu_used "$g") MiB used 60 s after the crash (was $base MiB before)"
  done
  back=$(now_ms)
  figure crash_to_gpu_memory_back_ms $(( back - crash ))
  local again
  again=$(timeout 180 "${CTL[@]}" submit --devices $n --name kit-gpu-again -- "$KIT_PY" "$KIT/checks/cuda_rank.py" --mib 4096 2>&1) ||
    fail "a job on the same GPUs after the crash failed: $(tail -3 <<<"$again")"
  [[ $(ctl --json show kit-gpu-again | flat | jget cuda_visible_devices) == "$gpus" ]] ||
    note "the next job got GPUs $(ctl --json show kit-gpu-again | flat | jget cuda_visible_devices), not $gpus"
  pass "$n rank(s) holding 4 GiB each: rank $((n - 1))'s SIGSEGV named, every rank gone, memory back on GPU(s) $gpus, a new job ran there"
}

check_launch_cuda() {
  need_gpus 1
  need_cuda
  launch_cuda() {
    local via=$1 log=$KIT_WORK/launch-cuda-$1.log rc=0
    (cd "$KIT_WORK" && PYTHONPATH=$KIT/python LTD_SOCKET=$LTD_SOCK LTRUN=$KIT/bin/ltrun PATH=$KIT/bin:$PATH \
      timeout 200 "$KIT_PY" "$KIT/checks/launch_check.py" "$via" 1 cuda) >"$log" 2>&1 || rc=$?
    [[ $rc == 0 ]] || fail "ltd.launch via $via from a process with CUDA initialised failed (exit $rc): $(tail -3 "$log")"
  }
  launch_cuda ltrun
  if [[ ${KIT_GRPC:-} == yes ]]; then
    launch_cuda ltd
    pass "ltd.launch via ltd and via ltrun from a process that initialised CUDA: the rank used CUDA, its value came back"
  fi
  pass "ltd.launch via ltrun from a process that initialised CUDA: the rank used CUDA, its value came back (via ltd not checked: no grpcio in $KIT_PY)"
}

nccl() {  # NAME LOG TIMEOUT_S SUBMIT_ARGS... -- TRAIN_ARGS...
  local name=$1 log=$2 limit=$3 sub=() rc=0
  shift 3
  while [[ $1 != -- ]]; do sub+=("$1"); shift; done
  shift
  timeout "$limit" "${CTL[@]}" submit --devices 2 --name "$name" "${sub[@]}" -- \
    "$KIT_PY" "$KIT/checks/train.py" --backend nccl "$@" >"$log" 2>&1 || rc=$?
  return $rc
}

check_nccl_crash() {
  need_gpus 2
  need_nccl
  local log=$KIT_WORK/nccl-crash.log rec=$KIT_WORK/nccl-crash.flat rc=0
  nccl kit-nccl-crash "$log" 200 --heartbeat-timeout 30s -- --crash-rank 1 --crash-step 3 || rc=$?
  ctl --json show kit-nccl-crash | flat >"$rec"
  [[ $rc == 1 && $(jget root_cause.rank <"$rec") == 1 && $(jget root_cause.reason <"$rec") == exited ]] ||
    fail "exit code $rc; want rank 1 exited 1 as the root cause: $(cause_of "$rec")"
  mapfile -t pids < <(rank_pids "$rec")
  wait_for 5 none_alive "${pids[@]}" || fail "ranks alive after the teardown: ${pids[*]}"
  figure crash_to_every_rank_gone_ms $(( $(to_ms "$(jget ended_at <"$rec")") - $(to_ms "$(event_at crash "$log")") ))
  pass "NCCL DDP: rank 1's exception is the root cause; rank 0 (in NCCL) torn down"
}

check_nccl_hang() {
  need_gpus 2
  need_nccl
  local log=$KIT_WORK/nccl-hang.log rec=$KIT_WORK/nccl-hang.flat rc=0 msg
  nccl kit-nccl-hang "$log" 200 --heartbeat-timeout 10s -- --steps 100000 --stall-rank 1 --stall-step 5 || rc=$?
  ctl --json show kit-nccl-hang | flat >"$rec"
  msg=$(jget root_cause.message <"$rec")
  [[ $rc == 124 && $(jget root_cause.rank <"$rec") == 1 && $(jget root_cause.reason <"$rec") == hang ]] ||
    fail "exit code $rc; want rank 1's hang as the root cause: $(cause_of "$rec")"
  grep -q "1 stalled outside a collective" <<<"$msg" ||
    fail "the verdict does not name rank 1 as stalled outside a collective: $msg"
  [[ $(jget hang_report.ranks.0.in_collective <"$rec") == true ]] ||
    fail "rank 0 (waiting inside NCCL) is not seen in a collective: $(jget hang_report.ranks.0.stack <"$rec" | cut -c1-300)"
  figure hang_to_verdict_ms $(( $(to_ms "$(jget root_cause.at <"$rec")") - $(to_ms "$(event_at stall "$log")") ))
  pass "NCCL DDP: rank 1 stalled outside a collective named; rank 0 seen waiting in NCCL (--heartbeat-timeout 10s)"
}

check_nccl_watchdog() {
  need_gpus 1
  need_nccl
  local log=$KIT_WORK/nccl-watchdog.log rec=$KIT_WORK/nccl-watchdog.flat rc=0 name=kit-nccl-watchdog n
  if ((KIT_NGPU >= 2)); then
    n=2
    # No heartbeats: only PyTorch's watchdog (20 s) can end rank 0's wait.
    nccl "$name" "$log" 240 --no-auto-heartbeat -- --steps 100000 --stall-rank 1 --stall-step 3 --pg-timeout 20 || rc=$?
  else
    n=1
    timeout 240 "${CTL[@]}" submit --devices 1 --name "$name" --no-auto-heartbeat -- \
      "$KIT_PY" "$KIT/checks/watchdog.py" 20 >"$log" 2>&1 || rc=$?
  fi
  ctl --json show "$name" | flat >"$rec"
  [[ $rc == 124 ]] && fail "the job was called hung; want PyTorch's NCCL watchdog to end it: $(cause_of "$rec")"
  [[ $(jget state <"$rec") == FAILED && $(jget root_cause.rank <"$rec") == 0 ]] ||
    fail "exit code $rc, $(jget state <"$rec"); want rank 0 ended by the watchdog: $(cause_of "$rec") $(tail -3 "$log")"
  grep -qi "watchdog" "$log" || fail "no word of the watchdog in rank 0's output: $(tail -3 "$log")"
  mapfile -t pids < <(rank_pids "$rec")
  wait_for 5 none_alive "${pids[@]}" || fail "ranks alive after the teardown: ${pids[*]}"
  figure stall_to_job_ended_ms $(( $(to_ms "$(jget ended_at <"$rec")") - $(to_ms "$(event_at stall "$log")") ))
  # The root cause as ltd words it (an uncaught exception's abort names
  # the exception), cut to a line of the report.
  local said
  said=$(jget root_cause.message <"$rec" | cut -c1-200)
  pass "$n-rank NCCL communicator: PyTorch's watchdog aborted the collective after its 20 s timeout; rank 0 $(jget root_cause.reason <"$rec"), every rank gone; root cause: $said"
}
