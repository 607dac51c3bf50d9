// A submit request as any local user's client may send it (proto/ltd.proto
// SubmitRequest), turned into a job spec (daemon/api/api_convert.h's
// SpecFromRequest) and judged (model/job.h's ValidateSpec), as the service
// does before the job table sees it. Invariants: a refusal is one bounded
// line; a spec taken keeps the bounds the docs promise (names, tokens,
// labels, --after, world size, times, an array's bytes) and is saved and
// read back the same.
#include <signal.h>

#include <nlohmann/json.hpp>

#include "api_convert.h"
#include "fuzz_check.h"

using namespace ltd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  v1::SubmitRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return 0;
  const absl::StatusOr<JobSpec> spec = SpecFromRequest(req);
  if (!spec.ok()) {
    fuzz::CheckRefusal(spec.status());
    return 0;
  }
  FUZZ_CHECK(spec->name.size() <= 128 && spec->after.size() <= 64);
  FUZZ_CHECK(spec->submit_token.size() <= kMaxSubmitTokenBytes);
  FUZZ_CHECK(spec->label.size() <= kMaxLabelBytes);
  for (const auto* list : {&spec->argv, &spec->env}) {
    for (const std::string& s : *list) FUZZ_CHECK(s.find('\0') == std::string::npos);
  }
  FUZZ_CHECK(spec->nodes.node_rank >= -1);
  // --array: at most kMaxArrayTasks tasks, never of a multi-node run.
  FUZZ_CHECK(spec->array_tasks.size() <= kMaxArrayTasks);
  FUZZ_CHECK(spec->array_tasks.empty() || spec->nodes.nnodes == 1);

  SpecLimits limits;
  limits.slots = 8;
  limits.cpus = 16;
  const absl::Status valid = ValidateSpec(*spec, limits);
  if (!valid.ok()) {
    fuzz::CheckRefusal(valid);
    return 0;
  }
  FUZZ_CHECK(spec->devices >= 1 && spec->devices <= limits.slots);
  FUZZ_CHECK(!spec->argv.empty() && !spec->argv[0].empty());
  FUZZ_CHECK(!spec->cwd.empty() && spec->cwd[0] == '/');
  for (const std::string* out : {&spec->output, &spec->error}) {
    FUZZ_CHECK(out->empty() || out->front() == '/');
  }
  FUZZ_CHECK(spec->nodes.nnodes >= 1 &&
             int64_t{spec->nodes.nnodes} * spec->devices <= (int64_t{1} << 24));
  FUZZ_CHECK(spec->nodes.node_rank < spec->nodes.nnodes);
  FUZZ_CHECK(spec->warn_signal.signal >= 0 && spec->warn_signal.signal < NSIG);
  for (auto d : {spec->heartbeat_timeout, spec->startup_timeout, spec->grace, spec->time_limit,
                 spec->hold_on_hang}) {
    FUZZ_CHECK(d.count() >= 0 && d <= std::chrono::hours(24 * 365));
  }
  FUZZ_CHECK(spec->max_restarts >= 0 && spec->max_restarts <= limits.max_restarts);
  // An array's records, one submit's, are at most 64 MiB together.
  size_t bytes = spec->cwd.size();
  for (const auto* list : {&spec->argv, &spec->env}) {
    for (const std::string& s : *list) bytes += s.size() + 1;
  }
  FUZZ_CHECK(spec->array_tasks.size() <= 1 || bytes * spec->array_tasks.size() <= (64u << 20));

  // The job's record on disk holds the spec byte for byte.
  Job job;
  job.id = "1";
  job.spec = *spec;
  // The job table keeps the ids --after's references resolve to (a
  // reference to no job is refused there), not the bytes the client sent.
  job.spec.after.clear();
  const nlohmann::json saved = ToJson(job);
  const std::optional<Job> read = JobFromJson(nlohmann::json::parse(saved.dump()));
  FUZZ_CHECK(read.has_value() && ToJson(*read) == saved);
  return 0;
}
