// Slurm's compressed host lists, as in SLURM_JOB_NODELIST: `gpu[01-04,07]`,
// `a1,b[2-3]`, `rack[1-2]-n[01-02]` (several bracket groups: every
// combination, the last group varying fastest). A range keeps its low
// bound's zero padding (`[08-10]` is 08, 09, 10). Pure functions over
// untrusted text: a list is measured before it is expanded, so a huge range
// is refused, never expanded into memory, and a host name longer than 253
// bytes (DNS's limit) is refused.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ltd {

// Every host of `list`, in Slurm's order; an error names what is wrong
// with it, or that it holds more than `max_hosts` hosts.
absl::StatusOr<std::vector<std::string>> ExpandHostlist(std::string_view list,
                                                        size_t max_hosts = 65536);

// The first host of `list` (the job's first node), however many it holds.
absl::StatusOr<std::string> FirstHost(std::string_view list);

// How many hosts `list` holds (saturating at SIZE_MAX), without expanding it.
absl::StatusOr<size_t> CountHosts(std::string_view list);

}  // namespace ltd
