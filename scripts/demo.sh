#!/usr/bin/env bash
# The main job: installs what is missing, builds, starts ltd on a temporary
# socket and state dir, runs a real 4-rank LibTorch DDP job, shows `ps` and
# `show`, then makes one rank crash and another hang, and shows each torn
# down with its root cause. Stops ltd and proves nothing of the jobs is left.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
build=$(realpath "${BUILD_DIR:-build}")
train=$build/examples/train
[ -x "$train" ] || { echo "demo: $train was not built (is libtorch-dev installed?)" >&2; exit 1; }

tmp=$(mktemp -d /tmp/ltd-demo.XXXXXX)
export LTD_SOCKET=$tmp/ltd.sock
# Ranks inherit the client's environment: this marks every process of the demo.
export LTD_DEMO_TAG=$tmp
ltctl() { "$build/client/ltctl" "$@"; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
cleanup() {
  [ -n "${ltd_pid:-}" ] && kill "$ltd_pid" 2>/dev/null && wait "$ltd_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

step "start ltd (4 device slots) on $LTD_SOCKET"
# --restore-window 0: the demo's jobs end with its ltd (by default they
# would outlive a restart of ltd for 10 minutes, under their supervisors).
"$build/daemon/ltd" --socket "$LTD_SOCKET" --state-dir "$tmp/state" --devices 4 \
  --restore-window 0 2>"$tmp/ltd.log" &
ltd_pid=$!
for _ in $(seq 100); do [ -S "$LTD_SOCKET" ] && break; sleep 0.05; done

step "a clean 4-rank DDP job, attached"
ltctl submit --devices 4 --name ddp --heartbeat-timeout 30s -- "$train" --steps 300 --print-every 100
echo "exit code: $?"
ltctl ps -a
ltctl show ddp

step "rank 2 crashes at step 400: ps while it trains, then the other ranks are torn down at once"
ltctl submit -d --devices 4 --name crash --heartbeat-timeout 30s -- \
  "$train" --steps 100000 --step-ms 5 --print-every 1000 --crash-rank 2 --crash-step 400
for _ in $(seq 100); do
  [ "$(ltctl --json show crash | grep -c '"last_step": [1-9]')" -ge 4 ] && break
  sleep 0.1
done
sleep 2.5  # long enough for a step rate
ltctl ps
set +e
ltctl attach crash
echo "exit code: $?"
set -e
ltctl show crash

step "rank 1 hangs at step 30: found by its missed heartbeats, with a hang report"
set +e
ltctl submit --devices 4 --name hang --heartbeat-timeout 3s -- \
  "$train" --steps 100000 --step-ms 5 --print-every 1000 --hang-rank 1 --hang-step 30
echo "exit code: $?"
set -e
ltctl show hang

step "ps -a, then stop ltd"
ltctl ps -a
kill "$ltd_pid"; wait "$ltd_pid"; ltd_pid=
export -n LTD_DEMO_TAG  # so that the check below does not find itself
left=$(grep -lsa "LTD_DEMO_TAG=$tmp" /proc/[0-9]*/environ | grep -vc "/proc/$$/" || true)
echo "processes of the demo's jobs still alive: $left"
