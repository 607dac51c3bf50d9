#!/usr/bin/env bash
# The Debian packages under a real systemd, on one release: boots an
# overlay of a cached root of RELEASE (debian_root.sh: bookworm, trixie)
# with systemd-nspawn, installs scripts/package.sh's .debs with
# `apt-get install ./...deb` (their dependencies from the archive), and
# checks what users and admins rely on: the socket enabled on install, a
# user's 2-rank gloo DDP job with that release's python3-torch through
# `ltctl submit` (socket activation), `ltd.Client().ps()` from python3,
# `systemctl restart ltd` and an upgrade in place keeping a running job
# (same pids), the watchdog killing a wedged ltd and systemd restarting it
# with the job still running, ltd's log in the journal, an unknown config
# key failing `systemctl start` with the key in the journal, `apt-get
# remove` leaving no ltd/supervisor/rank process, `apt-get purge` leaving
# none of the packages' files, units, state or users. Leaves nothing
# behind: the machine is powered off, its overlay unmounted, its
# directory removed.
#
#   package_test.sh SOURCE_DIR RELEASE DEB_DIR   (as root; DEB_DIR holds the .debs)
set -euo pipefail
src=$1
release=$2
deb_dir=$3
[[ $(id -u) == 0 ]] || { echo "package test: needs root (skipped)"; exit 77; }
for tool in systemd-nspawn nsenter debootstrap; do
  command -v $tool >/dev/null || { echo "package test: no $tool (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
t0=$(date +%s)
step() { echo "package test [$(( $(date +%s) - t0 ))s]: $*"; }

mapfile -t debs < <(find "$deb_dir" -maxdepth 1 -name '*.deb' | sort)
((${#debs[@]} == 4)) || { echo "package test: want the 4 .debs of scripts/package.sh in $deb_dir, found ${#debs[@]}" >&2; exit 1; }
step "the Debian root of $release"
cache=$("$src/tests/package/debian_root.sh" "$release")

# nspawn, with no systemd on the host to ask, makes the cgroups of the
# machine (payload/) and of itself (supervisor/) below its own; the ones
# this run makes go with it.
cg_mount=$(findmnt -n -t cgroup2 -o TARGET | head -1)
cg_base=$cg_mount$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
cg_made=()
for d in payload supervisor; do [[ -e $cg_base/$d ]] || cg_made+=("$cg_base/$d"); done

run=$(mktemp -d /var/tmp/ltd-package-test.XXXXXX)
machine=ltd-test-$release-$$
nspawn_pid=
mounted=
cleanup() {
  local rc=$?
  set +e
  if [[ -n $nspawn_pid ]] && kill -0 "$nspawn_pid" 2>/dev/null; then
    # nspawn turns SIGTERM into a clean shutdown of the booted system.
    kill -TERM "$nspawn_pid"
    for _ in $(seq 300); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$nspawn_pid" 2>/dev/null; then
      echo "package test: the machine did not power off in 30 s; killing it" >&2
      kill -KILL "$nspawn_pid"
      rc=1
    fi
    wait "$nspawn_pid" 2>/dev/null
  fi
  rmdir "/run/systemd/nspawn/propagate/$machine" 2>/dev/null
  for d in "${cg_made[@]}"; do
    [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
    if [[ -d $d ]]; then echo "package test: cgroup $d is left (not empty)" >&2; rc=1; fi
  done
  if [[ -n $mounted ]]; then
    umount -R "$run/root" 2>/dev/null || umount -l "$run/root"
  fi
  if grep -q " $run/" /proc/mounts; then
    echo "package test: mounts left under $run:" >&2; grep " $run/" /proc/mounts >&2; rc=1
  fi
  if [[ $rc != 0 && -f $run/console.log ]]; then
    echo "---- the machine's console (last 60 lines) ----" >&2; tail -60 "$run/console.log" >&2
  fi
  rm -rf "$run"
  exit $rc
}
trap cleanup EXIT
fail() { echo "package test: FAILED: $*" >&2; exit 1; }

# A copy of the cache per run, as an overlay (the cache stays clean).
mkdir -p "$run/upper" "$run/work" "$run/root"
if mount -t overlay overlay -o "lowerdir=$cache,upperdir=$run/upper,workdir=$run/work" "$run/root" 2>/dev/null; then
  mounted=1
else
  step "no overlayfs here: copying the root"
  cp -a "$cache/." "$run/root/"
fi
mkdir -p "$run/root/root/debs"
install -m 0644 "${debs[@]}" "$run/root/root/debs/"

step "booting the machine"
SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 systemd-nspawn --boot --register=no --keep-unit \
  --machine="$machine" -D "$run/root" >"$run/console.log" 2>&1 </dev/null &
nspawn_pid=$!
# The booted systemd: the descendant of nspawn that is PID 1 in its namespace.
sd=
for _ in $(seq 300); do
  for p in $(ps -e -o pid= -o comm= | awk '$2 == "systemd" { print $1 }'); do
    a=$p
    while [[ $a -gt 1 ]]; do
      a=$(awk '{ print $4 }' "/proc/$a/stat" 2>/dev/null || echo 0)
      [[ $a == "$nspawn_pid" ]] && { sd=$p; break 2; }
    done
  done
  [[ -n $sd ]] && break
  kill -0 "$nspawn_pid" 2>/dev/null || fail "systemd-nspawn exited"
  sleep 0.1
done
[[ -n $sd ]] || fail "no systemd came up in the machine within 30 s"
step "the machine's systemd is pid $sd"
inm() { nsenter -t "$sd" -a -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }
# ltd's journal (a pipe into `grep -q` would end journalctl with SIGPIPE,
# a failure under pipefail).
journal() { inm journalctl -u ltd.service --no-pager -o cat; }
as_user() { inm runuser -u alice -- env LTD_SOCKET=/run/ltd/ltd.sock "$@"; }
# systemctl answers once PID 1's private socket is up; then it waits for
# the boot to finish.
state=
for _ in $(seq 600); do
  state=$(inm timeout 120 systemctl is-system-running --wait 2>/dev/null || true)
  [[ $state == running || $state == degraded ]] && break
  sleep 0.2
done
step "the $release machine is $state"
[[ $state == running || $state == degraded ]] || fail "the machine's systemd is '$state'"
[[ $state == degraded ]] && step "degraded: $(inm systemctl --failed --no-legend | tr '\n' ' ')"

step "apt-get install ./debs/*.deb (dependencies from the archive)"
for dep in python3-grpcio python3-protobuf python3-cloudpickle; do
  [[ $(inm dpkg-query -W -f '${Status}' "$dep" 2>/dev/null) != *" installed" ]] ||
    fail "$dep is in the root already: the test would not see the package pull it in"
done
inm sh -c 'cd /root/debs && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ./*.deb' \
  >"$run/apt.log" 2>&1 || { cat "$run/apt.log" >&2; fail "apt-get install"; }
# What the packages own, for the purge's check below.
inm dpkg-query -L ltd python3-ltd libltworker0 libltworker-dev >"$run/owned"
inm systemctl enable --now ltd.socket
[[ $(inm systemctl is-enabled ltd.socket) == enabled ]] || fail "ltd.socket is not enabled"
[[ $(inm systemctl is-active ltd.socket) == active ]] || fail "ltd.socket is not active"
[[ $(inm systemctl is-active ltd.service || true) != active ]] || fail "ltd.service runs before anyone connected"
[[ -f $run/root/etc/ltd/ltd.toml ]] || fail "no /etc/ltd/ltd.toml"
inm grep -qx /etc/ltd/ltd.toml /var/lib/dpkg/info/ltd.conffiles || fail "ltd.toml is not a conffile"
inm man -w ltd.toml >/dev/null 2>&1 || [[ -f $run/root/usr/share/man/man5/ltd.toml.5.gz ]] || fail "no ltd.toml(5)"

step "a user's 2-rank gloo DDP job with $release's python3-torch through socket activation"
inm useradd -m alice
# Both ranks train the same model on different data; DDP's all-reduce
# makes their weights equal, which each prints.
cat >"$run/root/home/alice/ddp.py" <<'PY'
import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(5):
    opt.zero_grad()
    model(torch.full((8, 4), float(rank + 1))).pow(2).mean().backward()
    opt.step()
weights = sum(p.sum().item() for p in model.parameters())
print(f"rank {rank} of {dist.get_world_size()} torch {torch.__version__} weights {weights:.6f} as {os.getuid()}")
dist.destroy_process_group()
PY
inm chown alice: /home/alice/ddp.py
uid=$(inm id -u alice)
out=$(as_user sh -c 'cd /home/alice && ltctl submit --devices 2 --name ddp python3 ddp.py' 2>&1) ||
  fail "the DDP job failed: $out"
w0=$(sed -n 's/^\[0\] rank 0 of 2 torch .* weights \([-0-9.]*\) as '"$uid"'$/\1/p' <<<"$out")
w1=$(sed -n 's/^\[1\] rank 1 of 2 torch .* weights \([-0-9.]*\) as '"$uid"'$/\1/p' <<<"$out")
[[ -n $w0 && $w0 == "$w1" ]] || fail "the ranks' weights differ or are missing: $out"
step "  $(grep -m1 '^\[0\] rank 0' <<<"$out")"
[[ $(inm systemctl is-active ltd.service) == active ]] || fail "ltd.service did not start on the connection"
# The Python client as installed: its dependencies came from the archive.
inm runuser -u alice -- python3 -c 'import ltd; ltd.Client().ps()' >"$run/py.log" 2>&1 ||
  fail "python3 -c 'import ltd; ltd.Client().ps()': $(cat "$run/py.log")"
py=$(inm runuser -u alice -- python3 -c 'import ltd; jobs = ltd.Client().ps(all=True); print(len(jobs), jobs[0].name, jobs[0].state)' 2>&1) ||
  fail "ltd.Client().ps() failed: $py"
step "  ltd.Client().ps(all=True): $py"

# A job's rank pids, in rank order.
job_pids() { as_user ltctl show "$1" --json | tr -d ' \n' | grep -o '"pid":[0-9]*' | cut -d: -f2 | tr '\n' ' '; }
step "systemctl restart ltd keeps a running job"
id=$(as_user ltctl submit -d --devices 2 -- /bin/sh -c 'while :; do sleep 1; done')
for _ in $(seq 100); do [[ $(as_user ltctl show "$id" --json | tr -d ' \n') == *'"state":"RUNNING"'* ]] && break; sleep 0.1; done
before=$(job_pids "$id")
[[ -n $before ]] || fail "job $id has no pids"
main_before=$(inm systemctl show -p MainPID --value ltd.service)
inm systemctl restart ltd
main_after=$(inm systemctl show -p MainPID --value ltd.service)
[[ $main_before != "$main_after" ]] || fail "ltd did not restart (MainPID $main_before)"
after=$(job_pids "$id")
[[ $before == "$after" ]] || fail "job $id's ranks changed over the restart: '$before' -> '$after'"
[[ $(as_user ltctl show "$id" --json | tr -d ' \n') == *'"state":"RUNNING"'* ]] || fail "job $id is not RUNNING after the restart"
step "  job $id's ranks $before, ltd $main_before -> $main_after"

step "the watchdog: a wedged ltd is killed and restarted, the job survives"
inm mkdir -p /run/systemd/system/ltd.service.d
inm sh -c 'printf "[Service]\nWatchdogSec=4s\nEnvironmentFile=-/run/ltd-test-wedge\n" > /run/systemd/system/ltd.service.d/wedge.conf'
inm sh -c 'echo LTD_TEST_WEDGE_AFTER_MS=1500 > /run/ltd-test-wedge'
inm systemctl daemon-reload
inm systemctl restart ltd
wedged=$(inm systemctl show -p MainPID --value ltd.service)
restarts=$(inm systemctl show -p NRestarts --value ltd.service)
# Only the ltd started with it wedges: the one systemd starts next does not.
inm rm -f /run/ltd-test-wedge
for _ in $(seq 300); do
  now=$(inm systemctl show -p MainPID --value ltd.service)
  [[ $now != "$wedged" && $now != 0 && $(inm systemctl is-active ltd.service) == active ]] && break
  sleep 0.1
done
[[ $now != "$wedged" && $now != 0 ]] || fail "the wedged ltd ($wedged) was not replaced within 30 s"
(( $(inm systemctl show -p NRestarts --value ltd.service) > restarts )) || fail "systemd did not restart ltd (NRestarts)"
# The journal may be a moment behind systemd.
for _ in $(seq 50); do
  grep -q "Watchdog timeout" <<<"$(journal)" && break
  sleep 0.1
done
grep -q "Watchdog timeout" <<<"$(journal)" ||
  fail "no watchdog timeout in the journal: $(inm journalctl -u ltd.service --no-pager | tail -45)"
[[ $(job_pids "$id") == "$before" ]] || fail "job $id did not survive the watchdog: '$(job_pids "$id")'"
step "  ltd $wedged -> $now: $(grep -m1 'Watchdog timeout' <<<"$(journal)")"
inm rm -f /run/systemd/system/ltd.service.d/wedge.conf
inm systemctl daemon-reload

step "journalctl -u ltd shows ltd's log"
log=$(journal)
grep -q "configuration from /etc/ltd/ltd.toml" <<<"$log" || fail "no 'configuration from' in the journal"
grep -q "ltd listening on /run/ltd/ltd.sock (socket from systemd)" <<<"$log" || fail "no 'listening' in the journal: $log"

step "an unknown config key fails systemctl start, with the key in the journal"
inm cp /etc/ltd/ltd.toml /root/ltd.toml.orig
inm sh -c 'echo "restore-windw = \"1m\"" >> /etc/ltd/ltd.toml'
if inm systemctl restart ltd 2>/dev/null; then fail "ltd started with an unknown key"; fi
grep -q "unknown key 'restore-windw'; did you mean 'restore-window'?" <<<"$(journal)" ||
  fail "the unknown key is not in the journal"
step "  $(grep -m1 "unknown key" <<<"$(journal)")"
inm cp /root/ltd.toml.orig /etc/ltd/ltd.toml
inm systemctl reset-failed ltd.service
inm systemctl start ltd.service
[[ $(job_pids "$id") == "$before" ]] || fail "job $id was not adopted again after the failed start"

step "an upgrade in place restarts ltd and keeps the running job"
# The same packages under a later version, repacked without compression.
for deb in "${debs[@]}"; do
  rm -rf "$run/upgrade"
  dpkg-deb -R "$deb" "$run/upgrade"
  sed -i -e 's/^Version: .*/&+upgrade1/' -e 's/^\(Depends: libltworker0 (= .*\))/\1+upgrade1)/' "$run/upgrade/DEBIAN/control"
  dpkg-deb --root-owner-group -Znone -b "$run/upgrade" "$run/root/root/upgrade-$(basename "$deb")" >/dev/null
done
rm -rf "$run/upgrade"
main_before=$(inm systemctl show -p MainPID --value ltd.service)
inm sh -c 'cd /root && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ./upgrade-*.deb' >"$run/apt.log" 2>&1 ||
  { cat "$run/apt.log" >&2; fail "apt-get install (upgrade)"; }
for pkg in ltd python3-ltd libltworker0 libltworker-dev; do
  [[ $(inm dpkg-query -W -f '${Version}' $pkg) == *+upgrade1 ]] || fail "the upgrade of $pkg did not install"
done
main_after=$(inm systemctl show -p MainPID --value ltd.service)
[[ $main_after != 0 && $main_after != "$main_before" ]] || fail "the upgrade did not restart ltd ($main_before -> $main_after)"
[[ $(job_pids "$id") == "$before" ]] || fail "job $id did not survive the upgrade: '$(job_pids "$id")'"
step "  ltd $main_before -> $main_after, job $id's ranks $before"

step "apt-get remove ends every job and leaves no ltd process"
inm sh -c 'DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq ltd' >"$run/apt.log" 2>&1 ||
  { cat "$run/apt.log" >&2; fail "apt-get remove"; }
left=$(inm ps -e -o pid=,user:16=,comm= | awk '$3 == "ltd" || $3 == "lt-shim" || $3 == "lt-exec" || $2 == "alice"')
[[ -z $left ]] || fail "processes left after remove: $left"
[[ -d $run/root/var/lib/ltd ]] || fail "remove took the state dir (only purge may)"
# Ended as `ltctl shutdown` ends jobs: torn down and recorded.
record=$(inm cat "/var/lib/ltd/jobs/$id/job.json" | tr -d ' \n')
[[ $record == *'"state":"CANCELLED"'* ]] || fail "job $id was not recorded ended by the removal: ${record:0:300}"
step "apt-get purge leaves none of the packages' files, units, users or state"
inm sh -c 'DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq ltd python3-ltd libltworker0 libltworker-dev' \
  >"$run/apt.log" 2>&1 || { cat "$run/apt.log" >&2; fail "apt-get purge"; }
left=()
while read -r path; do
  # Directories the packages share with others (/usr/bin, and /lib, a
  # link to usr/lib on a merged /usr) stay.
  [[ -e $run/root$path || -L $run/root$path ]] && [[ ! -d $run/root$path ]] && left+=("$path")
done <"$run/owned"
for path in /var/lib/ltd /run/ltd /etc/ltd /usr/libexec/ltd /usr/share/ltd /usr/share/doc/ltd \
            /usr/lib/python3/dist-packages/ltd /usr/lib/python3/dist-packages/ltworker \
            /usr/lib/x86_64-linux-gnu/ltd /usr/include/ltworker; do
  [[ -e $run/root$path ]] && left+=("$path")
done
left+=($(cd "$run/root" && find etc/systemd lib/systemd usr/lib/systemd -name 'ltd.*' 2>/dev/null))
left+=($(inm dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' 2>/dev/null | awk '$2 ~ /^(ltd|python3-ltd|libltworker0|libltworker-dev)$/ { print "dpkg:" $2 }'))
# The packages make no users or groups: the ones there are the release's and alice.
if inm getent passwd ltd >/dev/null || inm getent group ltd >/dev/null; then left+=("user or group ltd"); fi
((${#left[@]} == 0)) || fail "left after purge: ${left[*]}"

step "passed; powering the machine off"
