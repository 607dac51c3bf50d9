// Part of the service adapter: the job model as v1 API messages, and API
// requests checked and turned into the job model. Requests carry POSIX
// strings as bytes; replies carry them as display text (valid UTF-8, each
// byte of an invalid sequence as `\xNN`), cut where a reply must stay
// bounded. Protobuf, no gRPC; the job model knows neither.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "job.h"
#include "job_manager.h"
#include "ltd.pb.h"
#include "resource_limits.h"

namespace ltd {

// How much of a job's text one reply carries.
struct ViewLimits {
  size_t argv_text;  // the whole command, as display text
  size_t text;       // each message, error, stack
  size_t nodes;      // a run's nodes (each node shown whole), then a count
};
// `ps` of 10,000 jobs, one of them with a 700 KB command, stays small.
inline constexpr ViewLimits kListLimits{256, 1024, 4 * 1024};
// `show`: everything a person reads, and far below gRPC's 4 MB per reply.
inline constexpr ViewLimits kShowLimits{64 * 1024, 64 * 1024, 1024 * 1024};

// The job for the API, with live progress marks (stragglers, rates).
void ToProto(const Job& job, const ViewLimits& limits, v1::Job* out);
// A rank that no longer runs: its steps per second over its run, from its
// start to its last heartbeat (0 without a step or a heartbeat).
double AverageStepsPerSecond(const Rank& r);
// Each of the model's enum values as the proto's value of its name.
// Microseconds, as the records keep them (no time ltd shows has more): a
// job reads the same before and after an ltd restart.
void SetTime(WallTime t, google::protobuf::Timestamp* out);
v1::Job::State ToProto(JobState state);
v1::Rank::State ToProto(RankState state);
v1::RootCause::Reason ToProto(CauseReason reason);
v1::HangReport::Rank::StackStatus ToProto(StackStatus status);
v1::Job::HeartbeatMode ToProto(HeartbeatMode mode);
void ToProto(const RootCause& cause, size_t text_limit, v1::RootCause* out);
// The `ended` event of a finished job.
void FillEnded(const Job& job, v1::Ended* out);
// A device slot for `ltctl gpus`.
void ToProto(const SlotView& slot, v1::Slot* out);

// A request's fields checked and copied into a job spec (uid and gid are
// the caller's, set by the service). An error is one line naming the field
// and what to do. `limits`: the most the ranks may have (the admin's for
// the caller: admin_limits.h); the request's rlimits may only lower them.
absl::StatusOr<JobSpec> SpecFromRequest(const v1::SubmitRequest& req,
                                        const std::vector<ResourceLimit>& limits = StartLimits());
// JOB as a request gives it: an id or a name, never garbage.
absl::Status CheckJobRef(std::string_view ref);

}  // namespace ltd
