#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test,
# then every fuzzer briefly on its committed corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
# Tests that need a GPU skip themselves where there is none.
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --timeout 300 -j2
# The fuzzers, briefly: every harness on its committed corpus for 5 s
# (17 harnesses: about 90 s after their sanitized build, ~8 min here from
# a warm ccache). Longer runs
# and growing the corpus: docs/design.md, "Fuzzers". The suite under
# ASan and UBSan is scripts/sanitize.sh, run by hand until a whole run
# passes (docs/design.md, "Sanitizers").
scripts/fuzz.sh "${FUZZ_SECONDS:-5}"
