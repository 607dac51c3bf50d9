// Mounts below a dir, for the tests' proof that nothing is left mounted (a
// job's errors/ tmpfs). Defined in harness.cc.
#pragma once

#include <string>
#include <vector>

namespace ltd::test {

// Mount points at or below `dir` in this process's mount namespace,
// deepest first.
std::vector<std::string> MountsUnder(const std::string& dir);

}  // namespace ltd::test
