#!/usr/bin/env bash
# Builds the GPU check kit, dist/ltd-gpu-kit.tar.gz, and prints its path as
# its last line: one self-contained tree to copy to a bare GPU host and run
# there as root (docs/gpu-kit.md):
#
#   tar xzf ltd-gpu-kit.tar.gz && ltd-gpu-kit/gpu-check.sh --out /tmp/report
#
# The programs (ltd, ltctl, ltrun, lt-shim, lt-shim-etcd, lt-exec, lt-userio), the worker
# runtime (libltworker, the automatic-heartbeat module, the ltworker
# package), the Python client with its generated stubs and cloudpickle (for
# ltd.launch), the check script and its rank programs, and every shared
# library the programs load that is not glibc's: found with ldd, copied to
# lib/kit and named in each program's RUNPATH ($ORIGIN/...), so nothing is
# looked up on the host but glibc (the kit says which version it needs,
# in MANIFEST). No LD_LIBRARY_PATH: it would reach the ranks.
#
# The programs come from scripts/build.sh's tree (./build, or $BUILD_DIR):
# the build CI and developers already have, so the kit costs a link and a
# copy, not a second compile; installed with --strip. Needs patchelf
# (scripts/install-deps.sh). KIT_NO_BUILD=1 packs $BUILD_DIR as it is,
# building nothing (a tree built by someone else, e.g. another worktree's).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=${BUILD_DIR:-build}
out=${KIT_OUT_DIR:-$src/dist}
max_mib=48
command -v patchelf >/dev/null || { echo "gpu-kit: no patchelf (apt-get install patchelf)" >&2; exit 1; }

if [[ ${KIT_NO_BUILD:-0} == 1 ]]; then
  for f in daemon/ltd client/ltctl cmake_install.cmake; do
    [[ -f $build/$f ]] || { echo "gpu-kit: KIT_NO_BUILD=1 but $build has no $f (build it with scripts/build.sh, or unset KIT_NO_BUILD)" >&2; exit 1; }
  done
  echo "gpu-kit: packing $build as it is (KIT_NO_BUILD=1)" >&2
else
  echo "gpu-kit: building in $build" >&2
  BUILD_DIR=$build scripts/build.sh ltd ltctl ltrun lt-shim lt-shim-etcd lt-exec lt-userio ltworker ltd_python \
    ltd_python_client man_pages >&2
  # Built where NCCL is (the install wants it), but not packed: it must load
  # the GPU host's libnccl, not a copy of the build host's.
  if grep -q libltworker_nccl "$build/worker_runtime/cmake_install.cmake"; then
    BUILD_DIR=$build scripts/build.sh ltworker_nccl >&2
  fi
fi
[[ -f $build/python/ltd/_pb/ltd_pb2.py ]] ||
  { echo "gpu-kit: no Python client in $build/python (apt-get install protobuf-compiler-grpc)" >&2; exit 1; }

stage=$(mktemp -d /tmp/ltd-gpu-kit.XXXXXX)
trap 'rm -rf "$stage"' EXIT
inst=$stage/install
kit=$stage/ltd-gpu-kit
cmake --install "$build" --prefix "$inst" --strip >/dev/null

mkdir -p "$kit/lib/kit" "$kit/python" "$kit/share/ltd"
cp -a "$inst/bin" "$inst/sbin" "$inst/libexec" "$kit/"
cp -a "$inst"/lib/libltworker.so* "$kit/lib/"
cp -a "$inst/share/ltd/python" "$kit/share/ltd/"
# The Python client and ltworker for the checks' own Python (the host's,
# any version): pure Python, with the stubs generated in the build tree.
cp -a "$build/python/ltd" "$inst/share/ltd/python/ltworker" "$kit/python/"
cloudpickle=$(python3 -c 'import cloudpickle, os; print(os.path.dirname(cloudpickle.__file__))' 2>/dev/null ||
  /usr/bin/python3 -c 'import cloudpickle, os; print(os.path.dirname(cloudpickle.__file__))')
cp -a "$cloudpickle" "$kit/python/cloudpickle"
find "$kit" -name __pycache__ -prune -exec rm -rf {} +
install -m 0755 scripts/gpu-kit/gpu-check.sh "$kit/gpu-check.sh"
install -d "$kit/checks"
install -m 0644 scripts/gpu-kit/checks/*.sh scripts/gpu-kit/checks/*.py scripts/gpu-kit/checks/*.awk "$kit/checks/"

# glibc's own objects stay the host's: they must match its ld.so.
glibc=" linux-vdso.so.1 ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1"
glibc+=" libresolv.so.2 libutil.so.1 libanl.so.1 "
is_glibc() { [[ $glibc == *" $1 "* ]]; }
mapfile -t elves < <(find "$kit" -type f -exec sh -c 'head -c4 "$1" | grep -q "^.ELF"' _ {} \; -print | sort)
for elf in "${elves[@]}"; do
  while read -r name path; do
    is_glibc "$name" && continue
    [[ $path == "$kit"/* || -e $kit/lib/kit/$name ]] && continue
    install -m 0644 "$(readlink -f "$path")" "$kit/lib/kit/$name"
    strip --strip-unneeded --remove-section=.comment "$kit/lib/kit/$name"
  done < <(ldd "$elf" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }')
done
# Each program names the copies relative to itself; each copy its siblings.
# A static program (lt-exec) loads nothing, and patchelf would break it.
for elf in "${elves[@]}"; do
  readelf -dW "$elf" | grep -q '(NEEDED)' || continue
  dir=$(dirname "${elf#"$kit"/}")
  # shellcheck disable=SC2001 # every component to "..": no glob says "[^/]*"
  up=$(sed 's|[^/]*|..|g' <<<"$dir")
  patchelf --set-rpath "\$ORIGIN/$up/lib/kit" "$elf"
done
# shellcheck disable=SC2016 # $ORIGIN is the loader's, not the shell's
for lib in "$kit"/lib/kit/*; do patchelf --set-rpath '$ORIGIN' "$lib"; done

# Every object resolves to the kit or to glibc, and the glibc it needs.
for elf in "${elves[@]}" "$kit"/lib/kit/*; do
  while read -r name arrow path _; do
    [[ $arrow == "=>" ]] || continue
    if [[ $path == "not" ]]; then echo "gpu-kit: ${elf#"$kit"/} needs $name, which nothing provides" >&2; exit 1; fi
    is_glibc "$name" || [[ $(readlink -f "$path") == "$kit"/* ]] ||
      { echo "gpu-kit: ${elf#"$kit"/} loads $path from the host" >&2; exit 1; }
  done < <(env -u LD_LIBRARY_PATH ldd "$elf")
done
glibc_needed=$(for elf in "${elves[@]}" "$kit"/lib/kit/*; do objdump -T "$elf"; done |
  grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
{
  echo "ltd $(sed -n 's/^project(ltd VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt) ($(git rev-parse --short HEAD 2>/dev/null || echo unknown))"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release), $(uname -m)"
  echo "needs glibc >= $glibc_needed (Debian 12 has 2.36)"
  echo "bundled libraries: $(find "$kit/lib/kit" -mindepth 1 -printf '%f\n' | sort | tr '\n' ' ')"
} >"$kit/MANIFEST"

mkdir -p "$out"
tarball=$out/ltd-gpu-kit.tar.gz
tar -C "$stage" --owner=0 --group=0 -czf "$tarball.tmp" ltd-gpu-kit
mv "$tarball.tmp" "$tarball"
size=$(stat -c %s "$tarball")
echo "gpu-kit: $(( size / 1024 )) KiB packed, $(du -sk "$kit" | cut -f1) KiB unpacked, needs glibc >= $glibc_needed" >&2
(( size <= max_mib * 1024 * 1024 )) ||
  { echo "gpu-kit: the kit is $(( size / 1048576 )) MiB, over the $max_mib MiB a GPU machine's copy allows" >&2; exit 1; }
echo "$tarball"
