// A job's record as its supervisor (lt-shim, a process of the job's own
// uid's making once it runs user code) sends it to ltd on the Watch stream
// (proto/shim_record.h): an Event in either form, typed Record or
// job.json's JSON. Invariants: any bytes give a record or none, never a
// throw; a record received is sent again, in each form, and received the
// same; a Record read is written and read back the same.
#include <nlohmann/json.hpp>

#include "fuzz_check.h"
#include "shim_record.h"

using namespace ltd;

namespace {

// A record as ltd keeps it from a watch: without the environment, which
// the events do not carry.
std::string Canonical(Job job, bool argv) {
  job.spec.env.clear();
  if (!argv) job.spec.argv.clear();
  nlohmann::json j = ToJson(job);
  return j.dump();  // throws on invalid UTF-8: must not
}

void CheckEvent(const shim::v1::Event& event) {
  const std::optional<ReceivedRecord> got = RecordOf(event);
  if (!got) return;
  FUZZ_CHECK(!got->job.id.empty());
  for (bool typed : {false, true}) {
    for (bool slim : {false, true}) {
      const shim::v1::Event sent = RecordEventOf(got->job, got->final_record, {typed, slim});
      std::string wire;
      FUZZ_CHECK(sent.SerializeToString(&wire));
      shim::v1::Event received;
      FUZZ_CHECK(received.ParseFromString(wire));
      const std::optional<ReceivedRecord> back = RecordOf(received);
      FUZZ_CHECK(back.has_value());
      FUZZ_CHECK(back->final_record == got->final_record);
      if (typed) FUZZ_CHECK(back->job.record_error == got->job.record_error);
      FUZZ_CHECK(Canonical(back->job, !slim) == Canonical(got->job, !slim));
    }
  }
}

void CheckRecord(const shim::v1::Record& record) {
  const std::optional<Job> job = FromProto(record);
  if (!job) return;
  shim::v1::Record written;
  ToProto(*job, &written);
  const std::optional<Job> again = FromProto(written);
  FUZZ_CHECK(again.has_value());
  FUZZ_CHECK(ToJson(*again).dump() == ToJson(*job).dump());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool record = data[0] & 1;
  ++data, --size;
  if (record) {
    shim::v1::Record r;
    if (r.ParseFromArray(data, static_cast<int>(size))) CheckRecord(r);
  } else {
    shim::v1::Event e;
    if (e.ParseFromArray(data, static_cast<int>(size))) CheckEvent(e);
  }
  return 0;
}
