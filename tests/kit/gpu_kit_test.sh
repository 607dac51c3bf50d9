#!/usr/bin/env bash
# The GPU check kit works where it will be used: a host with none of
# ltd's dependencies. Builds the kit (scripts/gpu-kit.sh), unpacks it in an
# overlay of a bare Debian 13 root (debootstrap's minbase, cached by
# tests/package/debian_root.sh: no Python, no gRPC, no libuv, nothing of
# ltd's), chroots there with /proc, /sys (cgroups included) and /dev
# mounted, and runs `gpu-check.sh --no-gpu`, which must pass: ltd starts and
# stops, shell jobs crash and hang under ltd and ltrun and are torn down
# with their cause, nothing is left. Then the same kit on this host with
# Debian's python3 (torch, grpcio): the gloo DDP and ltd.launch checks must
# pass too. Leaves no mount, process or directory behind.
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
  fake=$build/tests/fake_nvml/libnvidia-ml.so.1
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
  fi
else
  step "no torch in /usr/bin/python3: the Python checks were not run on this host"
fi
cat "$report"
step "done"
