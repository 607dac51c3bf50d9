#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test,
# then the suite again under the sanitizers (scripts/sanitize.sh; CI, with
# CI=true, runs its named subset to stay within its time).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
# Tests that need a GPU skip themselves where there is none.
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --timeout 300 -j2
# The fuzzers, briefly: every harness on its committed corpus for 5 s
# (about 15 harnesses: ~75 s after their sanitized build). Longer runs
# and growing the corpus: docs/design.md, "Fuzzers".
scripts/fuzz.sh "${FUZZ_SECONDS:-5}"
if [[ ${CI:-} == true ]]; then
  scripts/sanitize.sh --ci
else
  scripts/sanitize.sh
fi
