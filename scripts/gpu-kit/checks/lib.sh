# shellcheck shell=bash
# The check functions' toolbox (sourced by gpu-check.sh --run-one). A check
# ends by calling pass, fail or skip with one line saying why; figures go
# to its figures file as "NAME MILLISECONDS". Everything here works in a
# bare root: bash, coreutils, grep, sed, awk; no Python, no jq.

verdict() {
  printf '%s\t%s\n' "$1" "$(tr '\n\t' '  ' <<<"$2")" >"$KIT_RESULT"
  exit 0
}
pass() { verdict PASS "$1"; }
fail() { verdict FAIL "$1"; }
skip() { verdict SKIP "$1"; }
figure() { echo "$1 $2" >>"$KIT_FIGURES"; }
note() { echo "check: $*"; }

# ltctl on this run's ltd; CTL for `timeout` (which runs programs, not functions).
CTL=("$KIT/bin/ltctl" --socket "$LTD_SOCK")
ctl() { "${CTL[@]}" "$@"; }

# JSON on stdin to "PATH<TAB>VALUE" lines; jget PATH reads one value.
flat() { awk -f "$KIT/checks/flatten.awk"; }
jget() { awk -F'\t' -v p="$1" '$1 == p { sub(/^[^\t]*\t/, ""); print; exit }'; }
show_flat() { ctl --json show "$1" | flat; }

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# RFC 3339 (ltd's times) or an epoch with a fraction, to milliseconds.
to_ms() {
  case $1 in
    *T*) echo $(( $(date -d "$1" +%s%N) / 1000000 )) ;;
    *) awk -v t="$1" 'BEGIN { printf "%.0f\n", t * 1000 }' ;;
  esac
}
# The epoch a rank printed as "WHAT at EPOCH" in FILE.
event_at() { sed -n "s/.*$1 at \([0-9.]*\).*/\1/p" "$2" | head -1; }

# wait_for SECONDS COMMAND...: polls COMMAND until it succeeds; 1 if it never did.
wait_for() {
  local end=$(( $(date +%s) + $1 ))
  shift
  until "$@"; do
    (( $(date +%s) < end )) || return 1
    sleep 0.1
  done
}

alive() { [[ -d /proc/$1 ]] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
# The pids of a job's ranks, from its flattened record.
rank_pids() { awk -F'\t' '$1 ~ /^ranks\.[0-9]+\.pid$/ && $2 > 0 { print $2 }' "$1"; }
none_alive() { local p; for p in "$@"; do alive "$p" && return 1; done; return 0; }
job_state() { ctl --json show "$1" | flat | jget state; }
job_ended() { case $(job_state "$1") in SUCCEEDED|FAILED|CANCELLED|LOST) return 0 ;; esac; return 1; }

# submit_d ARGS...: a detached job's id.
submit_d() { ctl submit -d "$@" | tail -1; }

# The root cause of a flattened record as "rank R reason X ...".
cause_of() {
  awk -F'\t' '$1 ~ /^root_cause\./ { sub(/^root_cause\./, "", $1); printf "%s=%s ", $1, $2 }' "$1"
}

need_python() { [[ -n ${KIT_PY:-} ]] || skip "no Python: ${KIT_PY_WHY:-none found}"; }
need_torch() {
  need_python
  [[ ${KIT_TORCH:-} == yes ]] || skip "no torch in $KIT_PY: ${KIT_TORCH_WHY:-}"
}
need_gpus() {
  [[ ${KIT_NO_GPU:-0} == 1 ]] && skip "--no-gpu"
  (( ${KIT_NGPU:-0} >= $1 )) || skip "needs $1 GPU(s), NVML found ${KIT_NGPU:-0}${KIT_GPU_WHY:+ ($KIT_GPU_WHY)}"
}
need_cuda() {
  need_torch
  [[ ${KIT_CUDA:-} == yes ]] || skip "torch in $KIT_PY has no CUDA: ${KIT_CUDA_WHY:-}"
}
need_nccl() {
  need_cuda
  [[ ${KIT_NCCL:-} == yes ]] || skip "torch in $KIT_PY has no NCCL"
}

# The slots' memory used, "GPU MIB" a line, from `ltctl gpus`.
gpu_memory() {
  ctl --json gpus | flat | awk -F'\t' '
    $1 ~ /^slots\.[0-9]+\.gpu$/ { split($1, a, "."); gpu[a[2]] = $2 }
    $1 ~ /^slots\.[0-9]+\.usage\.memory_used_mib$/ { split($1, a, "."); used[a[2]] = $2 }
    END { for (i in gpu) print gpu[i], used[i] + 0 }' | sort -n
}
# The memory used on GPU $1 (MiB).
gpu_used() { gpu_memory | awk -v g="$1" '$1 == g { print $2 }'; }
# Field $2 of GPU $1's slot in `ltctl gpus` (state, minor, processes.0.pid).
slot_field() {
  ctl --json gpus | flat | awk -F'\t' -v g="$1" -v f="$2" '
    $1 ~ /^slots\.[0-9]+\.gpu$/ && $2 == g { split($1, a, "."); want = a[2] }
    { n = index(substr($1, 7), "."); if ($1 ~ /^slots\./) v[substr($1, 7, n - 1), substr($1, 7 + n)] = $2 }
    END { print v[want, f] }'
}
slot_state() { slot_field "$1" state; }
# Whether pid $2 is among the processes ltctl gpus lists on GPU $1.
gpu_lists_pid() {
  ctl --json gpus | flat | awk -F'\t' -v g="$1" -v pid="$2" '
    $1 ~ /^slots\.[0-9]+\.gpu$/ && $2 == g { split($1, a, "."); want = a[2] }
    $1 ~ /^slots\.[0-9]+\.processes\.[0-9]+\.pid$/ { split($1, a, "."); if ($2 == pid) has[a[2]] = 1 }
    END { exit !has[want] }'
}
