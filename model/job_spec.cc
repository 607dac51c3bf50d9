// What no job may ask for, whoever sends it: ltd checks every submit with
// this (any client can speak the protocol), ltrun its command line.
#include <algorithm>
#include <cctype>

#include "bytes.h"
#include "duration.h"
#include "job.h"
#include "str_util.h"

namespace ltd {
namespace {

using Millis = std::chrono::milliseconds;
constexpr Millis kMaxTimeout = std::chrono::hours(24 * 365);
constexpr Millis kMaxGrace = std::chrono::hours(24);
// execve takes about this much argv and environment together.
constexpr size_t kMaxArgvAndEnv = 2u << 20;

}  // namespace

absl::Status ValidateSpec(const JobSpec& spec, const SpecLimits& limits) {
  const int slots = limits.slots;
  if (spec.devices < 1) return absl::InvalidArgumentError("--devices must be at least 1");
  if (spec.devices > slots) {
    return absl::InvalidArgumentError(Cat("--devices ", spec.devices, " is more than the ", slots,
                                          " this ltd has; ask for at most ", slots));
  }
  if (spec.argv.empty() || spec.argv.front().empty()) {
    return absl::InvalidArgumentError(
        "no program given; usage: ltctl submit --devices N [options] PROGRAM [ARGS...]");
  }
  if (spec.name.size() > 128) {
    return absl::InvalidArgumentError("--name is longer than 128 characters; choose a shorter one");
  }
  if (!spec.name.empty()) {
    if (std::all_of(spec.name.begin(), spec.name.end(), ::isdigit)) {
      return absl::InvalidArgumentError("--name must not be all digits (those are job ids)");
    }
    for (char c : spec.name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
        return absl::InvalidArgumentError(Cat("--name '", DisplayEscape(spec.name, Controls::kEscape),
                                              "' may only use letters, digits, '-', '_' and '.'"));
      }
    }
  }
  if (spec.cwd.empty() || spec.cwd.front() != '/') {
    return absl::InvalidArgumentError("the working directory must be an absolute path");
  }
  size_t bytes = spec.cwd.size();
  for (const auto* list : {&spec.argv, &spec.env}) {
    for (const std::string& s : *list) bytes += s.size() + 1;
  }
  if (bytes > kMaxArgvAndEnv) {
    return absl::InvalidArgumentError(Cat("the program's arguments and environment are ", bytes,
                                          " bytes; a program can be started with at most ",
                                          kMaxArgvAndEnv, ": pass less (a file of arguments)"));
  }
  struct Range {
    const char* flag;
    Millis value, max;
  };
  for (const Range& r : {Range{"--heartbeat-timeout", spec.heartbeat_timeout, kMaxTimeout},
                         Range{"--startup-timeout", spec.startup_timeout, kMaxTimeout},
                         Range{"--grace", spec.grace, kMaxGrace}}) {
    if (r.value.count() < 0) return absl::InvalidArgumentError(Cat(r.flag, " must not be negative"));
    if (r.value > r.max) {
      return absl::InvalidArgumentError(Cat(r.flag, " ", r.value.count(), "ms is more than ",
                                            FormatDuration(r.max), "; use a shorter one"));
    }
  }
  if (spec.max_restarts < 0 || spec.max_restarts > limits.max_restarts) {
    return absl::InvalidArgumentError(Cat("--max-restarts ", spec.max_restarts,
                                          " is outside 0..", limits.max_restarts,
                                          ", the limit of this ltd (--max-restarts-limit)"));
  }
  return absl::OkStatus();
}

}  // namespace ltd
