// A job's record as ltd reads it back from the state dir (<job
// dir>/job.json: store/job_store.cc's Load, model/job.h's JobFromJson), and
// as a supervisor of an older release sends it. Invariants: any bytes give
// a job or none, never a throw; a job read is written again as JSON that
// dumps (valid UTF-8) and reads back to the same record; an attempt's CPU
// count is none or not negative.
#include <limits.h>

#include <nlohmann/json.hpp>

#include "fuzz_check.h"
#include "job.h"

using namespace ltd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const std::optional<Job> job = JobFromJson(parsed);
  if (!job) return 0;
  FUZZ_CHECK(!job->id.empty());
  FUZZ_CHECK(job->spec.submit_token.size() <= kMaxSubmitTokenBytes);
  FUZZ_CHECK(job->spec.label.size() <= kMaxLabelBytes);
  // Groups are gids the kernel takes, at most NGROUPS_MAX, or none at all.
  if (job->spec.groups) {
    FUZZ_CHECK(job->spec.groups->size() <= NGROUPS_MAX);
    for (gid_t g : *job->spec.groups) FUZZ_CHECK(g != static_cast<gid_t>(-1));
  }
  // A CPU count is a duration or none, never negative.
  for (const Attempt& a : job->attempts) FUZZ_CHECK(!a.cpu || a.cpu->count() >= 0);
  const nlohmann::json first = ToJson(*job);
  const std::string dumped = first.dump();
  const std::optional<Job> again = JobFromJson(nlohmann::json::parse(dumped));
  FUZZ_CHECK(again.has_value());
  const nlohmann::json second = ToJson(*again);
  if (first != second) {
    std::fprintf(stderr, "first:  %s\nsecond: %s\n", dumped.c_str(), second.dump().c_str());
    FUZZ_CHECK(first == second);
  }
  return 0;
}
