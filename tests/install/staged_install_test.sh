#!/usr/bin/env bash
# A staged install at a prefix other than the configured one works on its
# own: `cmake --install BUILD --prefix P`, then P's ltd finds P's helpers
# (relative to itself, ../libexec/ltd), P's units name P, their
# Documentation= exists under P, and a 2-rank job runs under P's ltd and
# under P's ltrun. Usage: staged_install_test.sh BUILD_DIR (as root).
set -euo pipefail
build=$1
prefix=$(mktemp -d /tmp/ltd-staged.XXXXXX)
work=$(mktemp -d /tmp/ltd-staged-run.XXXXXX)
ltd_pid=
cleanup() {
  if [[ -n $ltd_pid ]] && kill -0 "$ltd_pid" 2>/dev/null; then
    kill -TERM "$ltd_pid"
    for _ in $(seq 100); do kill -0 "$ltd_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$ltd_pid" 2>/dev/null || true
  fi
  rm -rf "$prefix" "$work"
}
trap cleanup EXIT
fail() { echo "staged install: $*" >&2; [[ -f $work/ltd.log ]] && cat "$work/ltd.log" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in sbin/ltd bin/ltctl bin/ltrun libexec/ltd/lt-exec libexec/ltd/lt-shim \
         share/ltd/python/autoload/sitecustomize.py lib/systemd/system/ltd.service \
         lib/systemd/system/ltd.socket share/doc/ltd/README.md \
         share/bash-completion/completions/ltctl share/bash-completion/completions/ltrun; do
  [[ -e $prefix/$f ]] || fail "$f was not installed"
done
grep -qx "ExecStart=$prefix/sbin/ltd" "$prefix/lib/systemd/system/ltd.service" ||
  fail "ltd.service does not start $prefix/sbin/ltd: $(grep ExecStart "$prefix/lib/systemd/system/ltd.service")"
for unit in ltd.service ltd.socket; do
  grep '^Documentation=' "$prefix/lib/systemd/system/$unit" | tr ' ' '\n' | sed -n 's|.*file://||p' |
    while read -r doc; do [[ -e $doc ]] || fail "$unit: Documentation= names $doc, not installed"; done
done

# ltd from the staged prefix: no helper of the build tree beside it.
"$prefix/sbin/ltd" --socket "$work/ltd.sock" --state-dir "$work/state" --devices 2 \
  --restore-window 0 --config /dev/null >"$work/ltd.log" 2>&1 &
ltd_pid=$!
for _ in $(seq 200); do [[ -S $work/ltd.sock ]] && break; kill -0 $ltd_pid 2>/dev/null || break; sleep 0.05; done
[[ -S $work/ltd.sock ]] || fail "the staged ltd did not start"
out=$("$prefix/bin/ltctl" --socket "$work/ltd.sock" submit --devices 2 -- /bin/sh -c 'echo "rank $RANK of $WORLD_SIZE"') ||
  fail "the 2-rank job failed under the staged ltd: $out"
for r in 0 1; do
  grep -qx "\[$r\] rank $r of 2" <<<"$out" || fail "rank $r's line is missing: $out"
done
# Python ranks get the staged automatic heartbeat module.
grep -q "automatic heartbeats are off" "$work/ltd.log" && fail "the staged ltd found no python/autoload"

out=$("$prefix/bin/ltrun" --devices 2 -- /bin/sh -c 'echo "rank $RANK of $WORLD_SIZE"' 2>&1) ||
  fail "the 2-rank job failed under the staged ltrun: $out"
for r in 0 1; do
  grep -qx "\[$r\] rank $r of 2" <<<"$out" || fail "ltrun: rank $r's line is missing: $out"
done
echo "staged install at $prefix: ltd and ltrun ran a 2-rank job"
