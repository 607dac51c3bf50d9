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
# (21 harnesses: about 2 min after their sanitized build, ~8 min here from
# a warm ccache). Longer runs
# and growing the corpus: docs/design.md, "Fuzzers".
scripts/fuzz.sh "${FUZZ_SECONDS:-5}"
# The suite of ltd's own processes under ASan, LeakSanitizer and UBSan
# (--ci: docs/design.md, "Sanitizers"; here its tests take ~13 min after
# the sanitized build).
scripts/sanitize.sh --ci
