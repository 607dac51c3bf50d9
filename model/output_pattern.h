// `submit --output PATTERN` / `--error PATTERN`, as sbatch's -o/-e: a path
// with fields that each rank's file fills in.
//
// Since patterns kSbatchPatterns, the fields are sbatch's: %j the job id,
// %x the job's name (its id when it has none), %t the rank (RANK, global
// in a multi-node run), %n the node index (the run's node rank; 0 alone),
// %N the host's short name, %u the job's user, %% a percent sign; and %r,
// ltd's own, the rank on this node (LOCAL_RANK). Jobs submitted before
// (kLegacyPatterns, a record without `output_patterns`) keep the meaning
// they had: %n the job's name, and no %x, %t, %N, %u. %A and %a are
// sbatch's for arrays: the array's id and the task id (a job that is no
// array task: its id, and nothing).
//
// A pattern comes from a client or a record: hostile bytes. It is parsed
// into pieces by one pure function (a fuzzer calls it alone), and the
// pieces are what expand.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"

namespace ltd {

inline constexpr int kLegacyPatterns = 1;  // %n: the name
inline constexpr int kSbatchPatterns = 2;  // %n: the node, %x: the name
inline constexpr size_t kMaxPatternBytes = 4096;

enum class PatternField {
  kJobId,
  kName,
  kRank,
  kLocalRank,
  kNode,
  kHost,
  kUser,
  kArrayJobId,
  kArrayTaskId,
};

// A pattern, parsed: its text and fields in order.
struct OutputPattern {
  std::vector<std::variant<std::string, PatternField>> pieces;
};

// `pattern` of `flag` ("--output"), read with the meaning of `version`
// (kLegacyPatterns or kSbatchPatterns; others: kSbatchPatterns), or one
// line saying what is wrong with it and what to give instead.
absl::StatusOr<OutputPattern> ParseOutputPattern(std::string_view flag, std::string_view pattern,
                                                 int version = kSbatchPatterns);
// OK, or ParseOutputPattern's line.
absl::Status CheckOutputPattern(std::string_view flag, std::string_view pattern,
                                int version = kSbatchPatterns);

// What a rank's file fills in. A name's, host's or user's '/' becomes
// '_', so that none of them can choose the directory.
struct PatternValues {
  std::string_view job_id;
  std::string_view name;  // "": the job id
  int rank = 0;           // global (RANK)
  int local_rank = 0;     // on this node (LOCAL_RANK)
  int node = 0;
  std::string_view host;  // its short name: up to the first '.'
  std::string_view user;
  std::string_view array_job_id;  // "": no array task (%A is the job id, %a nothing)
  std::string_view array_task_id;
};
std::string ExpandOutputPattern(const OutputPattern& pattern, const PatternValues& values);

// Whether it has %a, which only an array's task can fill in.
bool PatternHasArrayTask(const OutputPattern& pattern);

// Whether ranks have a file each (the pattern has %t or %r).
bool PatternPerRank(const OutputPattern& pattern);
// Whether it names a field (other than the rank) whose value is not known
// before the job has an id and a node: %j, %n, %N, %u, and %x of a job
// with no name.
bool PatternNeedsJob(const OutputPattern& pattern, bool has_name);

}  // namespace ltd
