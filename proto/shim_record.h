// A job's record on the supervisor API (proto/shim.proto): the one codec
// between model/job.h's Job and the Record message, and of the Watch
// stream's record events in both forms, Record messages and the JSON of
// <job dir>/job.json (model/job.h's ToJson) that supervisors of the
// releases before Record send. lt-shim encodes with it, ltd decodes with
// it, and the job table's tests (LocalSupervisorHost) go through both.
#pragma once

#include <optional>

#include "job.h"
#include "shim.pb.h"

namespace ltd {

// The whole record, the environment included.
void ToProto(const Job& job, shim::v1::Record* out);
// nullopt: not a job's record (no id).
std::optional<Job> FromProto(const shim::v1::Record& record);

// How a watcher takes records.
struct RecordForm {
  bool typed = false;  // Record messages (typed_records); else job.json's JSON
  bool slim = false;   // without the command line, which it has
};

// The event carrying `job`'s record (`final_record`: its end) in `form`,
// without the environment (ltd has it from the job's start; it is the
// largest part of a record sent each second). A typed one says whether the
// record is saved: `job.record_error` is why not.
shim::v1::Event RecordEventOf(const Job& job, bool final_record, RecordForm form);

struct ReceivedRecord {
  Job job;  // job.record_error: why <job dir>/job.json is behind it; empty: saved
  bool final_record = false;
};
// The record `event` carries, in either form; nullopt for an event of
// another kind, or bytes that are no job's record.
std::optional<ReceivedRecord> RecordOf(const shim::v1::Event& event);

}  // namespace ltd
