#!/usr/bin/env bash
# The GPU check kit works where it will be used: a host with none of
# ltd's dependencies. Builds the kit (scripts/gpu-kit.sh), unpacks it in an
# overlay of a bare Debian 13 root (debootstrap's minbase, cached by
# tests/package/debian_root.sh: no Python, no gRPC, no libuv, nothing of
# ltd's), chroots there with /proc, /sys (cgroups included) and /dev
# mounted, and runs `gpu-check.sh --no-gpu`, which must pass: ltd starts and
# stops, shell jobs crash and hang under ltd and ltrun and are torn down
# with their cause, nothing is left; again without cgroups (ltd falls back
# to a subreaper). Then the same kit on this host with Debian's python3
# (torch, grpcio): the gloo DDP and ltd.launch checks must pass too; and the
# GPU phase against fakes of NVML, CUDA and the driver's tree (fake_gpus).
# Leaves no mount, process or directory behind.
#
#   gpu_kit_test.sh SOURCE_DIR BUILD_DIR   (as root)
set -euo pipefail
src=$1
build=$2
[[ $(id -u) == 0 ]] || { echo "gpu kit test: needs root (skipped)"; exit 77; }
command -v debootstrap >/dev/null || { echo "gpu kit test: no debootstrap (scripts/install-deps.sh installs it)" >&2; exit 1; }
t0=$(date +%s)
step() { echo "gpu kit test [$(( $(date +%s) - t0 ))s]: $*"; }
fail() { echo "gpu kit test: FAILED: $*" >&2; exit 1; }

run=$(mktemp -d /var/tmp/ltd-gpu-kit-test.XXXXXX)
mounted=()
cleanup() {
  local rc=$? i
  set +e
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount -R "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}"
  done
  if grep -q " $run/" /proc/mounts; then
    echo "gpu kit test: mounts left under $run:" >&2; grep " $run/" /proc/mounts >&2; rc=1
  fi
  rm -rf "$run"
  exit $rc
}
trap cleanup EXIT

# The GPU checks' whole course without a GPU: the fake NVML (its `live`
# line: a process's memory counts while it lives), a fake CUDA in front of
# the host's CPU-only torch (tests/kit/fake_cuda: tensors on "cuda" are
# made on the CPU and their bytes written to the fake NVML), and a stand-in
# for the driver's tree (/proc/driver/nvidia/gpus, /dev/nvidiaN nodes of its
# major with no driver behind them). Not NCCL: those checks must say why
# they skip. Then one GPU, for device_isolation's one-GPU case.
fake_gpus() {  # FAKE_NVML_LIBRARY
  local nvml=$1 fk=$run/fake-gpus i n rc c r e iso want_iso=PASS
  mkdir -p "$fk/proc/gpus" "$fk/dev"
  for i in 0 1; do
    mkdir -p "$fk/proc/gpus/0000:0$i:00.0"
    printf 'Model:\t\t fake\nDevice Minor:\t %d\n' "$i" >"$fk/proc/gpus/0000:0$i:00.0/information"
    mknod "$fk/dev/nvidia$i" c 195 "$i"
  done
  iso=(env LTD_KIT_NVIDIA_PROC="$fk/proc" LTD_KIT_NVIDIA_DEV="$fk/dev")
  if ! e=$( (true <>"$fk/dev/nvidia0") 2>&1) && [[ ${e##*: } != "No such device or address" ]]; then
    step "  the stand-in device nodes cannot be opened here (${e##*: }): device_isolation is not checked"
    iso=(env) want_iso=SKIP
  fi
  # shellcheck disable=SC2016 # the wrapper's own expansions
  printf '#!/bin/sh\nKIT_FAKE_NVML_FILE=%s PYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH} exec /usr/bin/python3 "$@"\n' \
    "$run/fake-nvml" "$src/tests/kit/fake_cuda" >"$run/fake-python"
  chmod 0755 "$run/fake-python"
  for n in 2 1; do
    step "the GPU phase with the fake NVML and a fake CUDA, $n GPU(s)"
    printf 'live\ncount %d\nmem 0 100 16384\nmem 1 200 16384\n' "$n" >"$run/fake-nvml"
    r=$run/host/fake-cuda-$n
    rc=0
    "${iso[@]}" LT_FAKE_NVML_FILE="$run/fake-nvml" LTD_KIT_NVML_LIBRARY="$nvml" "$run/host/ltd-gpu-kit/gpu-check.sh" \
      --python "$run/fake-python" --only "$([[ $n == 2 ]] && echo 'nvml|cuda|gpu_|isolation|nccl' || echo isolation)" \
      --out "$r" >/dev/null || rc=$?
    [[ $rc == 0 ]] || { cat "$r/report.txt" >&2; fail "the fake-CUDA run with $n GPU(s) exited $rc"; }
    for c in ltd_start_gpu ltd_stop_gpu nothing_left $([[ $n == 2 ]] && echo nvml_gpus cuda_ltd cuda_ltrun gpu_crash gpu_leftover launch_cuda); do
      grep -q "^PASS $c " "$r/report.txt" || { cat "$r/report.txt" >&2; fail "$c did not pass with the fake CUDA ($n GPU(s))"; }
    done
    grep -q "^$want_iso device_isolation " "$r/report.txt" || { cat "$r/report.txt" >&2; fail "device_isolation is not $want_iso ($n GPU(s))"; }
    if [[ $n == 2 ]]; then
      for c in nccl_crash nccl_hang nccl_watchdog; do
        grep -q "^SKIP $c .*has no NCCL" "$r/report.txt" || { cat "$r/report.txt" >&2; fail "$c is not skipped for want of NCCL"; }
      done
      grep -q '"crash_to_gpu_memory_back_ms": [0-9]' "$r/summary.json" || fail "summary.json has no crash_to_gpu_memory_back_ms"
    fi
    step "  $(grep -E '^(PASS|FAIL) (gpu_crash|device_isolation) ' "$r/report.txt" | cut -c1-140 | tr '\n' ' ')"
  done
}

step "scripts/gpu-kit.sh"
kit=$(BUILD_DIR=$build KIT_OUT_DIR=$run/dist "$src/scripts/gpu-kit.sh" 2>"$run/kit.log" | tail -1) ||
  { tail -20 "$run/kit.log" >&2; fail "scripts/gpu-kit.sh"; }
step "  $(grep 'KiB packed' "$run/kit.log")"

step "the bare Debian 13 root"
cache=$("$src/tests/package/debian_root.sh" trixie bare)
# None of what ltd is built with is there (nor Python): each would hide
# a library the kit forgot.
present=$(find "$cache/usr/lib" "$cache/usr/bin" \( -name 'libuv.so*' -o -name 'libprotobuf.so*' -o -name 'libgrpc*.so*' \
  -o -name 'libabsl*.so*' -o -name 'libspdlog.so*' -o -name 'libfmt.so*' -o -name 'libprometheus*' -o -name 'libcivetweb*' \
  -o -name 'libcares.so*' -o -name 'libre2.so*' -o -name 'python3*' \) -print | head -5)
[[ -z $present ]] || fail "the bare root has what ltd is built with: $present"

# A copy of the cache per run, as an overlay (the cache stays clean).
mkdir -p "$run/upper" "$run/work" "$run/root"
if mount -t overlay overlay -o "lowerdir=$cache,upperdir=$run/upper,workdir=$run/work" "$run/root" 2>/dev/null; then
  mounted+=("$run/root")
else
  step "no overlayfs here: copying the root"
  cp -a "$cache/." "$run/root/"
fi
tar -C "$run/root/opt" -xzf "$kit"
mount -t proc proc "$run/root/proc" && mounted+=("$run/root/proc")
for m in sys dev; do
  mount --rbind "/$m" "$run/root/$m" && mounted+=("$run/root/$m")
  mount --make-rslave "$run/root/$m"
done

step "gpu-check.sh --no-gpu in the bare root"
rc=0
chroot "$run/root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  /opt/ltd-gpu-kit/gpu-check.sh --no-gpu --out /root/gpu-check-out || rc=$?
report=$run/root/root/gpu-check-out/report.txt
[[ -f $report ]] || fail "gpu-check.sh wrote no report (exit $rc)"
[[ $rc == 0 ]] || { cat "$report" >&2; fail "gpu-check.sh --no-gpu exited $rc in the bare root"; }
for c in ltd_start_cpu ltd_job crash_teardown hang_teardown ltrun_crash ltrun_hang ltd_stop_cpu nothing_left; do
  grep -q "^PASS $c " "$report" || { cat "$report" >&2; fail "$c did not pass in the bare root"; }
done
grep -q '^SKIP gloo_ddp .*no python3 in PATH' "$report" || { cat "$report" >&2; fail "gloo_ddp is not skipped for want of Python"; }
grep -q '"status": "PASS"' "$run/root/root/gpu-check-out/summary.json" || fail "summary.json has no PASS"
grep -q '^PASS ltd_start_cpu .*containment: cgroup' "$report" || { cat "$report" >&2; fail "ltd in the bare root did not use cgroups"; }
step "  $(head -1 "$report")"

# Without a cgroup tree (a sysfs of its own, nothing mounted on it): ltd
# falls back to a subreaper, the report says so, and the same checks pass.
step "gpu-check.sh --no-gpu in the bare root without cgroups"
umount -R "$run/root/sys" || fail "could not unmount the root's /sys"
mount -t sysfs sysfs "$run/root/sys" || fail "could not mount a sysfs in the root"
rc=0
chroot "$run/root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  /opt/ltd-gpu-kit/gpu-check.sh --no-gpu --out /root/no-cgroup-out >/dev/null || rc=$?
report=$run/root/root/no-cgroup-out/report.txt
[[ -f $report ]] || fail "gpu-check.sh wrote no report without cgroups (exit $rc)"
[[ $rc == 0 ]] || { cat "$report" >&2; fail "gpu-check.sh --no-gpu exited $rc without cgroups"; }
grep -q '^cgroup2: not mounted' "$report" || { cat "$report" >&2; fail "the report does not say cgroup2 is not mounted"; }
grep -q '^PASS ltd_start_cpu .*containment: subreaper' "$report" || { cat "$report" >&2; fail "ltd did not say it fell back to a subreaper"; }
for c in ltd_job crash_teardown hang_teardown ltrun_crash ltrun_hang ltd_stop_cpu nothing_left; do
  grep -q "^PASS $c " "$report" || { cat "$report" >&2; fail "$c did not pass without cgroups"; }
done
step "  $(head -1 "$report")"

if [[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
  step "gpu-check.sh --no-gpu on this host with /usr/bin/python3 (torch)"
  mkdir -p "$run/host"
  tar -C "$run/host" -xzf "$kit"
  rc=0
  "$run/host/ltd-gpu-kit/gpu-check.sh" --no-gpu --python /usr/bin/python3 --out "$run/host/out" >/dev/null || rc=$?
  report=$run/host/out/report.txt
  [[ $rc == 0 ]] || { cat "$report" >&2; fail "gpu-check.sh --no-gpu --python /usr/bin/python3 exited $rc"; }
  for c in gloo_ddp gloo_crash gloo_hang launch_ltrun; do
    grep -q "^PASS $c " "$report" || { cat "$report" >&2; fail "$c did not pass with /usr/bin/python3"; }
  done
  step "  $(head -1 "$report")"
  fake=${LTD_KIT_FAKE_NVML:-$build/tests/fake_nvml/libnvidia-ml.so.1}  # another, to try this script against a stale build
  if [[ -f $fake ]]; then
    # The GPU phase against the tests' fake NVML (2 GPUs): ltd's slots are
    # them, nvml_gpus reads them; the checks that need CUDA say so.
    step "the GPU phase with the tests' fake NVML"
    printf 'count 2\nmem 0 100 16384\nmem 1 200 16384\n' >"$run/fake-nvml"
    rc=0
    LT_FAKE_NVML_FILE=$run/fake-nvml LTD_KIT_NVML_LIBRARY=$fake "$run/host/ltd-gpu-kit/gpu-check.sh" \
      --python /usr/bin/python3 --only 'nvml_gpus|cuda_ltd' --out "$run/host/fake" >/dev/null || rc=$?
    [[ $rc == 0 ]] || { cat "$run/host/fake/report.txt" >&2; fail "the fake-NVML run exited $rc"; }
    for c in ltd_start_gpu nvml_gpus ltd_stop_gpu nothing_left; do
      grep -q "^PASS $c " "$run/host/fake/report.txt" || { cat "$run/host/fake/report.txt" >&2; fail "$c did not pass with the fake NVML"; }
    done
    grep -q '^SKIP cuda_ltd .*no CUDA' "$run/host/fake/report.txt" || { cat "$run/host/fake/report.txt" >&2; fail "cuda_ltd is not skipped for want of CUDA"; }
    fake_gpus "$fake"
  fi
else
  step "no torch in /usr/bin/python3: the Python checks were not run on this host"
fi
cat "$report"
step "done"
