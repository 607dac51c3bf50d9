#!/usr/bin/env bash
# Configures and builds ltd into ./build (or $BUILD_DIR). Development and CI
# builds treat warnings as errors; BUILD_TYPE picks the CMake build type.
#   scripts/build.sh [TARGET...]    # everything, or only these targets
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # Paths inside the checkout are hashed relative to it, so a clone in any
  # folder (CI's, a second worktree) reuses what an earlier build compiled.
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-20G}
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" -DLTD_WERROR=ON "${launcher[@]}" >/dev/null
targets=()
(($#)) && targets=(--target "$@")
cmake --build "$build" -j"$(nproc)" "${targets[@]}"
