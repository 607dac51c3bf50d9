#include "dependency.h"

#include "job.h"
#include "str_util.h"

namespace ltd {
namespace {

constexpr std::string_view kHow =
    "give afterok:ID[:ID...], afterany:ID, afternotok:ID or singleton, joined with ','";

// A user's text in a message: printable ASCII as it is, other bytes
// '\xNN', at most 64 bytes of it.
std::string Shown(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size() && i < 64; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b >= 0x20 && b < 0x7f) {
      out.push_back(static_cast<char>(b));
    } else {
      out += Cat("\\x", kHex[b >> 4], kHex[b & 15]);
    }
  }
  if (s.size() > 64) out += "...";
  return out;
}

std::optional<DependencyKind> KindOf(std::string_view word) {
  if (word == "afterok") return DependencyKind::kAfterOk;
  if (word == "afterany") return DependencyKind::kAfterAny;
  if (word == "afternotok") return DependencyKind::kAfterNotOk;
  return std::nullopt;
}

}  // namespace

std::string_view ToString(DependencyKind kind) {
  switch (kind) {
    case DependencyKind::kAfterOk:
      return "afterok";
    case DependencyKind::kAfterAny:
      return "afterany";
    case DependencyKind::kAfterNotOk:
      return "afternotok";
  }
  return "afterok";
}

absl::StatusOr<DependencySpec> ParseDependency(std::string_view text) {
  if (text.size() > kMaxDependencyBytes || text.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        Cat("--dependency is over ", kMaxDependencyBytes, " bytes or holds a NUL byte; ", kHow));
  }
  if (text.empty()) return absl::InvalidArgumentError(Cat("--dependency is empty; ", kHow));
  DependencySpec out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t comma = text.find(',', at);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(at, comma - at);
    at = comma + 1;
    if (item == "singleton") {
      out.singleton = true;
      continue;
    }
    const size_t colon = item.find(':');
    const std::string_view word = item.substr(0, colon);
    const std::optional<DependencyKind> kind = KindOf(word);
    if (!kind) {
      const bool slurm = word == "after" || word == "aftercorr" || word == "aftersuccess";
      return absl::InvalidArgumentError(Cat(
          "--dependency: '", Shown(item.empty() ? std::string_view("(nothing)") : word), "' is ",
          slurm ? "a Slurm dependency ltd does not have" : "no dependency", "; ", kHow));
    }
    if (colon == std::string_view::npos || colon + 1 == item.size()) {
      return absl::InvalidArgumentError(
          Cat("--dependency: ", word, " names no job; give ", word, ":ID[:ID...]"));
    }
    std::string_view jobs = item.substr(colon + 1);
    size_t j = 0;
    while (j <= jobs.size()) {
      size_t next = jobs.find(':', j);
      if (next == std::string_view::npos) next = jobs.size();
      const std::string_view job = jobs.substr(j, next - j);
      j = next + 1;
      if (job.empty()) {
        return absl::InvalidArgumentError(Cat("--dependency: ", word, ":", Shown(jobs),
                                              " has an empty job; give ", word, ":ID[:ID...]"));
      }
      if (job.find('+') != std::string_view::npos) {
        return absl::InvalidArgumentError(
            Cat("--dependency: ", Shown(job),
                ": a time after a job (sbatch's +TIME) is not taken; give the job alone"));
      }
      out.refs.push_back(DependencyRef{*kind, std::string(job)});
    }
  }
  return out;
}

DependencyOutcome OutcomeOf(DependencyKind kind, std::optional<JobState> state) {
  if (state && !IsFinal(*state)) return DependencyOutcome::kWaiting;
  // No record left: it ended, but how is not known.
  if (!state) {
    return kind == DependencyKind::kAfterAny ? DependencyOutcome::kMet : DependencyOutcome::kNever;
  }
  const bool ok = *state == JobState::kSucceeded;
  switch (kind) {
    case DependencyKind::kAfterOk:
      return ok ? DependencyOutcome::kMet : DependencyOutcome::kNever;
    case DependencyKind::kAfterAny:
      return DependencyOutcome::kMet;
    case DependencyKind::kAfterNotOk:
      return ok ? DependencyOutcome::kNever : DependencyOutcome::kMet;
  }
  return DependencyOutcome::kNever;
}

}  // namespace ltd
