# shellcheck shell=bash
# The checks that need no GPU: jobs of shell ranks (every host), of the
# host's torch on gloo, and ltd.launch (where Python is). Each runs under
# the ltd of the CPU phase (logical slots), or under ltrun.

# shellcheck disable=SC2016 # the ranks' shell expands these
# A rank that crashes (rank 1, SIGSEGV) while rank 0 left a grandchild in
# a session of its own: the teardown must take both.
CRASH_RANK='echo hb 1 >&3
if [ "$RANK" = 1 ]; then sleep 1; echo "rank 1 crash at $(date +%s.%N)"; kill -SEGV $$; fi
setsid sleep 600 </dev/null >/dev/null 2>&1 &
echo "grandchild $!"
while :; do sleep 0.2; done'
# Rank 1 beats once and stalls; rank 0 beats on.
HANG_RANK='echo hb 1 >&3
if [ "$RANK" = 1 ]; then echo "rank 1 stall at $(date +%s.%N)"; sleep 600; fi
while :; do echo hb >&3; sleep 0.2; done'

# Checks a crashed job's end: exit code, root cause, nothing of it alive.
crash_verdict() {  # LOG RC RECORD_FLAT WHERE
  local log=$1 rc=$2 rec=$3 where=$4 g crash ended
  [[ $rc == 139 ]] || fail "$where: exit code $rc, want 139 (rank 1's SIGSEGV); $(cause_of "$rec")"
  [[ $(jget root_cause.rank <"$rec") == 1 && $(jget root_cause.reason <"$rec") == signaled ]] ||
    fail "$where: root cause is not rank 1 signaled: $(cause_of "$rec")"
  g=$(sed -n 's/^\[0\] grandchild \([0-9]*\)$/\1/p' "$log" | head -1)
  [[ -n $g ]] || fail "$where: rank 0 never said its grandchild's pid (see the log)"
  mapfile -t pids < <(rank_pids "$rec")
  wait_for 5 none_alive "${pids[@]}" "$g" ||
    fail "$where: still alive after the job ended: ranks ${pids[*]}, grandchild $g"
  crash=$(event_at "crash" "$log")
  ended=$(jget ended_at <"$rec")
  [[ -n $crash && -n $ended ]] && figure crash_to_job_ended_ms $(( $(to_ms "$ended") - $(to_ms "$crash") ))
}

check_ltd_job() {
  local out
  # shellcheck disable=SC2016 # the rank's shell expands these
  out=$(timeout 60 "${CTL[@]}" submit --devices 2 --name kit-hello -- /bin/sh -c 'echo "rank $RANK of $WORLD_SIZE"') ||
    fail "a 2-rank shell job failed (exit $?): $out"
  for r in 0 1; do grep -qx "\[$r\] rank $r of 2" <<<"$out" || fail "rank $r's line is missing: $out"; done
  pass "2 shell ranks ran and exited 0 under ltd ($KIT_CONTAINMENT)"
}

check_crash_teardown() {
  local log=$KIT_WORK/crash.log rc=0
  timeout 90 "${CTL[@]}" submit --devices 2 --name kit-crash -- /bin/sh -c "$CRASH_RANK" >"$log" 2>&1 || rc=$?
  ctl --json show kit-crash | flat >"$KIT_WORK/crash.flat"
  crash_verdict "$log" "$rc" "$KIT_WORK/crash.flat" "ltd"
  pass "rank 1's SIGSEGV is the root cause; every rank and rank 0's setsid grandchild gone ($KIT_CONTAINMENT)"
}

check_hang_teardown() {
  local log=$KIT_WORK/hang.log rc=0 rec=$KIT_WORK/hang.flat stall at
  timeout 90 "${CTL[@]}" submit --devices 2 --name kit-hang --heartbeat-timeout 2s -- /bin/sh -c "$HANG_RANK" >"$log" 2>&1 || rc=$?
  ctl --json show kit-hang | flat >"$rec"
  [[ $rc == 124 ]] || fail "exit code $rc, want 124 (a hang); $(cause_of "$rec")"
  [[ $(jget root_cause.rank <"$rec") == 1 && $(jget root_cause.reason <"$rec") == hang ]] ||
    fail "the root cause is not rank 1's hang: $(cause_of "$rec")"
  mapfile -t pids < <(rank_pids "$rec")
  wait_for 5 none_alive "${pids[@]}" || fail "ranks still alive after the hang's teardown: ${pids[*]}"
  stall=$(event_at "stall" "$log")
  at=$(jget root_cause.at <"$rec")
  [[ -n $stall && -n $at ]] && figure hang_to_verdict_ms $(( $(to_ms "$at") - $(to_ms "$stall") ))
  pass "rank 1, silent past --heartbeat-timeout 2s, is the root cause (hang); every rank gone"
}

check_ltrun_crash() {
  local log=$KIT_WORK/ltrun-crash.log rc=0 report=$KIT_WORK/ltrun-crash.json
  timeout 90 "$KIT/bin/ltrun" --devices 2 --report "$report" -- /bin/sh -c "$CRASH_RANK" >"$log" 2>&1 || rc=$?
  [[ -f $report ]] || fail "ltrun wrote no --report (exit $rc): $(tail -3 "$log")"
  flat <"$report" >"$KIT_WORK/ltrun-crash.flat"
  crash_verdict "$log" "$rc" "$KIT_WORK/ltrun-crash.flat" "ltrun"
  pass "ltrun: rank 1's SIGSEGV is the root cause in --report; every rank and the grandchild gone"
}

check_ltrun_hang() {
  local log=$KIT_WORK/ltrun-hang.log rc=0 report=$KIT_WORK/ltrun-hang.json rec
  timeout 90 "$KIT/bin/ltrun" --devices 2 --heartbeat-timeout 2s --report "$report" -- /bin/sh -c "$HANG_RANK" >"$log" 2>&1 || rc=$?
  [[ -f $report ]] || fail "ltrun wrote no --report (exit $rc): $(tail -3 "$log")"
  rec=$(flat <"$report")
  [[ $rc == 124 ]] || fail "exit code $rc, want 124"
  [[ $(jget root_cause.rank <<<"$rec") == 1 && $(jget root_cause.reason <<<"$rec") == hang ]] ||
    fail "the root cause is not rank 1's hang: $(cause_of <(echo "$rec"))"
  pass "ltrun: rank 1's hang is the root cause; exit 124"
}

# The host's torch: 2 gloo DDP ranks train, crash, hang, named right.
gloo() {  # NAME LOG ARGS...: an attached 2-rank job of train.py; its exit code
  local name=$1 log=$2 rc=0
  shift 2
  timeout 200 "${CTL[@]}" submit --devices 2 --name "$name" --heartbeat-timeout 8s -- \
    "$KIT_PY" "$KIT/checks/train.py" "$@" >"$log" 2>&1 || rc=$?
  return $rc
}

check_gloo_ddp() {
  need_torch
  local log=$KIT_WORK/gloo.log rc=0 w0 w1
  gloo kit-gloo "$log" --steps 10 || rc=$?
  [[ $rc == 0 ]] || fail "the 2-rank gloo DDP job failed (exit $rc): $(tail -3 "$log")"
  w0=$(sed -n 's/^\[0\] rank 0 of 2 gloo .* weights \([-0-9.]*\)$/\1/p' "$log")
  w1=$(sed -n 's/^\[1\] rank 1 of 2 gloo .* weights \([-0-9.]*\)$/\1/p' "$log")
  [[ -n $w0 && $w0 == "$w1" ]] || fail "the ranks' weights differ or are missing: $(tail -3 "$log")"
  pass "2 gloo DDP ranks on torch $KIT_TORCH_VERSION trained 10 steps, weights equal"
}

check_gloo_crash() {
  need_torch
  local log=$KIT_WORK/gloo-crash.log rc=0 rec=$KIT_WORK/gloo-crash.flat crash ended
  gloo kit-gloo-crash "$log" --crash-rank 1 --crash-step 3 || rc=$?
  ctl --json show kit-gloo-crash | flat >"$rec"
  [[ $rc == 1 && $(jget root_cause.rank <"$rec") == 1 && $(jget root_cause.reason <"$rec") == exited ]] ||
    fail "exit code $rc; want rank 1 exited 1 as the root cause: $(cause_of "$rec")"
  jget root_cause.message <"$rec" | grep -q "kit crash on rank 1" ||
    fail "the root cause's message does not carry rank 1's exception: $(jget root_cause.message <"$rec")"
  mapfile -t pids < <(rank_pids "$rec")
  wait_for 5 none_alive "${pids[@]}" || fail "ranks alive after the teardown: ${pids[*]}"
  crash=$(event_at "crash" "$log")
  ended=$(jget ended_at <"$rec")
  [[ -n $crash && -n $ended ]] && figure crash_to_job_ended_ms $(( $(to_ms "$ended") - $(to_ms "$crash") ))
  pass "rank 1's exception is the root cause, with its message; rank 0 torn down"
}

check_gloo_hang() {
  need_torch
  local log=$KIT_WORK/gloo-hang.log rc=0 rec=$KIT_WORK/gloo-hang.flat stall at msg
  gloo kit-gloo-hang "$log" --steps 1000 --stall-rank 1 --stall-step 4 || rc=$?
  ctl --json show kit-gloo-hang | flat >"$rec"
  msg=$(jget root_cause.message <"$rec")
  [[ $rc == 124 && $(jget root_cause.rank <"$rec") == 1 && $(jget root_cause.reason <"$rec") == hang ]] ||
    fail "exit code $rc; want rank 1's hang as the root cause: $(cause_of "$rec")"
  grep -q "1 stalled outside a collective" <<<"$msg" || fail "the verdict does not say rank 1 stalled outside a collective: $msg"
  [[ $(jget hang_report.ranks.0.in_collective <"$rec") == true ]] ||
    fail "rank 0 is not seen waiting in a collective: $(grep '^hang_report.ranks.0' "$rec" | head -5)"
  stall=$(event_at "stall" "$log")
  at=$(jget root_cause.at <"$rec")
  [[ -n $stall && -n $at ]] && figure hang_to_verdict_ms $(( $(to_ms "$at") - $(to_ms "$stall") ))
  pass "rank 1, stalled outside a collective, named; rank 0 seen in a collective (--heartbeat-timeout 8s)"
}

launch() {  # VIA DEVICES [cuda]
  local log=$KIT_WORK/launch-$1.log rc=0
  (cd "$KIT_WORK" && PYTHONPATH=$KIT/python LTD_SOCKET=$LTD_SOCK LTRUN=$KIT/bin/ltrun PATH=$KIT/bin:$PATH \
    timeout 200 "$KIT_PY" "$KIT/checks/launch_check.py" "$@") >"$log" 2>&1 || rc=$?
  [[ $rc == 0 ]] || fail "ltd.launch via $1 failed (exit $rc): $(tail -3 "$log")"
  pass "$(tail -1 "$log")"
}

check_launch_ltrun() {
  need_python
  launch ltrun 2
}

check_launch_ltd() {
  need_python
  [[ ${KIT_GRPC:-} == yes ]] || skip "no grpcio/protobuf in $KIT_PY (the client needs them to reach ltd; ltd.launch via ltrun is checked instead)"
  launch ltd 2
}
