// Names that tie what ltd leaves on the machine (cgroups, rank markers) to
// one state dir, so that a later ltd, a test or an admin finds them again.
#pragma once

#include <cstdint>
#include <string>

namespace ltd {

// `v` as 16 lowercase hex digits.
std::string Hex64(uint64_t v);

// The tag every ltd on `state_dir` shares: a hash of its canonical path.
// Its cgroups live under <ltd's own cgroup>/ltd-<tag>.
std::string StateTag(const std::string& state_dir);

}  // namespace ltd
