#!/usr/bin/env bash
# Configures and builds ltd into ./build (or $BUILD_DIR). Development and CI
# builds treat warnings as errors; BUILD_TYPE picks the CMake build type.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" -DLTD_WERROR=ON "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)"
