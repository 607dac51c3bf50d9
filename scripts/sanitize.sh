#!/usr/bin/env bash
# The suite under AddressSanitizer, LeakSanitizer and UBSan
# (docs/design.md, "How the code is checked").
#
#   scripts/sanitize.sh            every test but the package ones
#   scripts/sanitize.sh --ci       the subset CI runs (below)
#   scripts/sanitize.sh -R REGEX   any other ctest selection
#
# Builds into ./build-asan (or $SAN_BUILD_DIR) with Debian's clang-16, not
# GCC 12: clang's -Wdangling and -Wreturn-stack-address (views and
# references that outlive their object) only exist there, and the
# fuzzers (scripts/fuzz.sh) need clang anyway. Both compilers' runtimes
# find the same bugs; clang links its runtime into each program, so a
# helper that execs a user's uninstrumented program hands it nothing.
#
# Every program reports to a file in build-asan/sanitizer-reports, the
# helpers ltd starts too (their stderr is /dev/null and their environment
# empty: cmake/sanitizer_defaults.cc.in). The run fails when any test fails
# or any report file appears, and names each.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${SAN_BUILD_DIR:-build-asan}

# The subset CI runs (scripts/test.sh, last): every test of ltd's own
# processes (unit, integration, e2e: security, containment, systemd,
# queue, metrics, nvml), without the multi-node, etcd, Slurm and Python
# client runs, which spend their minutes in torch, etcd and slurmd rather
# than in ltd's code and would take CI past its time (docs/design.md,
# "How the code is checked").
# The kit test (label kit) packs and runs a release build of its own
# (scripts/gpu-kit.sh builds into the build dir it is given): never here.
select=(-LE 'package|kit')
if [[ ${1:-} == --ci ]]; then
  shift
  select=(-LE 'package|kit|slurm|multinode|etcd|python')
fi
select+=("$@")

export CC=${SAN_CC:-clang-16} CXX=${SAN_CXX:-clang++-16}
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # As scripts/build.sh: hashed relative to the checkout, so CI's clone
  # reuses a developer's compiles.
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-20G}
fi
reports=$PWD/$build/sanitizer-reports

# -O1 and line tables: reports with file:line, at a third of -O2 -g's
# compile time. Debug keeps assert() on. The example trainer (LibTorch) is
# not ltd's code and takes longest to compile; its tests skip without it.
start=$SECONDS
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DLTD_SANITIZE=ON -DLTD_WERROR=ON \
  -DLTD_BUILD_EXAMPLES=OFF -DLTD_SANITIZER_LOG_DIR="$reports" \
  -DCMAKE_C_FLAGS_DEBUG="-O1 -gline-tables-only" -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" \
  "${launcher[@]}" >/dev/null
# Reports from the build itself (gtest's test discovery runs each test
# program) count too.
rm -rf "$reports"
mkdir -p "$reports"
chmod 1777 "$reports"
cmake --build "$build" -j"$(nproc)"
echo "sanitize: built in $((SECONDS - start)) s"

# What the brief of each runtime is; the built-in options add where to
# write (and stay in force for programs started without this environment).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1
start=$SECONDS
rc=0
ctest --test-dir "$build" --output-on-failure -j"${SAN_JOBS:-2}" "${select[@]}" || rc=$?
echo "sanitize: tests ran in $((SECONDS - start)) s"

shopt -s nullglob
found=("$reports"/*)
if ((${#found[@]})); then
  for f in "${found[@]}"; do
    echo "===== sanitizer report: $f"
    head -n 60 "$f"
  done
  echo "sanitize: ${#found[@]} sanitizer report(s) in $reports" >&2
  exit 1
fi
if ((rc != 0)); then
  echo "sanitize: tests failed (no sanitizer report file)" >&2
  exit "$rc"
fi
echo "sanitize: no sanitizer report"
