#!/usr/bin/env bash
# The libFuzzer harnesses (fuzz/, docs/design.md "Fuzzers"), built with
# clang-16, ASan and UBSan into ./build-fuzz (or $FUZZ_BUILD_DIR).
#
#   scripts/fuzz.sh [SECONDS] [NAME...]
#       Runs each harness (or those named) for SECONDS (default 30) on a
#       copy of its corpus, fuzz/corpus/NAME, which stays as committed.
#       Prints one line a harness, "NAME: N runs, 0 crashes" when clean;
#       on a crash, an invariant that failed or a sanitizer's report, it
#       prints the input's path (kept in build-fuzz/artifacts/) and the
#       report's end, and exits non-zero once every harness has run.
#   scripts/fuzz.sh --merge [SECONDS] [NAME...]
#       The same, then merges into fuzz/corpus/NAME the inputs of the run
#       that reach code the corpus did not (libFuzzer's -merge=1), for a
#       commit. Run it long (e.g. 3600) when a parser changed.
#
# A crash's input replays with `build-fuzz/fuzz/NAME PATH`.
set -euo pipefail
cd "$(dirname "$0")/.."
merge=0
if [[ ${1:-} == --merge ]]; then
  merge=1
  shift
fi
seconds=${1:-30}
if [[ ! $seconds =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh [--merge] [SECONDS] [NAME...]" >&2
  exit 2
fi
shift || true
build=${FUZZ_BUILD_DIR:-build-fuzz}
cc=${FUZZ_CC:-clang-16}
cxx=${FUZZ_CXX:-clang++-16}
if ! command -v "$cxx" >/dev/null; then
  echo "fuzz.sh: $cxx is missing; run scripts/install-deps.sh (clang-16, libclang-rt-16-dev)" >&2
  exit 2
fi
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # As scripts/build.sh: paths hashed relative to the checkout, so that
  # CI's clone reuses a developer's compiles.
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-20G}
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_CXX_COMPILER="$cxx" -DLTD_FUZZ=ON -DLTD_BUILD_TESTS=OFF -DLTD_BUILD_EXAMPLES=OFF \
  "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target ltd_fuzzers >/dev/null

names=("$@")
if ((${#names[@]} == 0)); then
  for dir in fuzz/corpus/*/; do names+=("$(basename "$dir")"); done
fi
artifacts="$PWD/$build/artifacts"
mkdir -p "$artifacts"
work=$(mktemp -d "${TMPDIR:-/tmp}/ltd-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
# A leak is a crash too; a UBSan report stops the run (built with
# -fno-sanitize-recover) and shows where.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
failed=0
for name in "${names[@]}"; do
  bin="$build/fuzz/$name"
  if [[ ! -x $bin ]]; then
    echo "$name: no such harness ($bin)"
    failed=1
    continue
  fi
  corpus="$work/$name"
  mkdir -p "$corpus"
  cp -r "fuzz/corpus/$name/." "$corpus/"
  log="$work/$name.log"
  rc=0
  "$bin" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts/$name-" "$corpus" >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if ((rc == 0)); then
    echo "$name: ${runs:-0} runs, 0 crashes"
  else
    failed=1
    input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    echo "$name: ${runs:-?} runs, 1 crash: ${input:-no input written (exit $rc)}"
    grep -E 'invariant failed|ERROR: |runtime error|SUMMARY' "$log" | head -5 | sed 's/^/  /'
  fi
  if ((merge)); then
    "$bin" -merge=1 "fuzz/corpus/$name" "$corpus" >"$work/$name.merge" 2>&1 ||
      echo "$name: merge failed; see $work/$name.merge"
  fi
done
exit "$failed"
