// A job's record (from the state dir or its supervisor, both hostile: a
// job's text is its ranks' and its user's bytes) as the API shows it
// (daemon/api/api_convert.h's ToProto with `ps`' and `show`'s limits).
// Invariants: every protobuf `string` of the reply is valid UTF-8 (else
// the reply cannot be sent), each text stays within its limit, and a
// run's nodes within the view's bytes for them, the rest counted.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include <nlohmann/json.hpp>

#include "api_convert.h"
#include "fuzz_check.h"

using namespace ltd;
namespace pb = google::protobuf;

namespace {

// Every string field of `m`, nested ones too: valid UTF-8, at most `max`.
void CheckStrings(const pb::Message& m, size_t max) {
  const pb::Reflection* r = m.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(m, f); ++i)
          CheckStrings(r->GetRepeatedMessage(m, f, i), max);
      } else {
        CheckStrings(r->GetMessage(m, f), max);
      }
      continue;
    }
    if (f->type() != pb::FieldDescriptor::TYPE_STRING) continue;
    const int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
    for (int i = 0; i < n; ++i) {
      const std::string s = f->is_repeated() ? r->GetRepeatedString(m, f, i) : r->GetString(m, f);
      if (!IsValidUtf8(s) || s.size() > max) {
        std::fprintf(stderr, "field %s: %zu bytes, %s\n", f->full_name().c_str(), s.size(),
                     IsValidUtf8(s) ? "valid UTF-8" : "not UTF-8");
        std::abort();
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::optional<Job> job = JobFromJson(nlohmann::json::parse(text, nullptr, false));
  if (!job) return 0;
  for (const ViewLimits& limits : {kListLimits, kShowLimits}) {
    v1::Job out;
    ToProto(*job, limits, &out);
    // A cut text ends in its mark, "… [+N bytes]": a few bytes more.
    CheckStrings(out, std::max(limits.argv_text, limits.text) + 32);
    // A run's nodes up to the view's bytes for them (the last one may pass
    // them), the rest counted.
    FUZZ_CHECK(static_cast<size_t>(out.nodes_size() + out.nodes_not_shown()) == job->nodes.size());
    size_t nodes = 0;
    for (const v1::NodeStatus& n : out.nodes()) {
      FUZZ_CHECK(nodes < limits.nodes);
      nodes += n.ByteSizeLong();
    }
    std::string wire;
    FUZZ_CHECK(out.SerializeToString(&wire));
  }
  return 0;
}
