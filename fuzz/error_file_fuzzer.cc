// A TORCHELASTIC_ERROR_FILE's message (model/error_file.h), which the root
// supervisor reads from a file the rank's user wrote. Invariants: any bytes
// give a message or none, never a throw; a message is at most
// kMaxErrorFileMessage bytes, valid UTF-8 wherever the file was, the text
// itself when it was no JSON and fit; white space alone says nothing; and
// a root cause holding it is written to a record and read back the same.
#include <nlohmann/json.hpp>

#include "bytes.h"
#include "error_file.h"
#include "fuzz_check.h"
#include "job.h"

using namespace ltd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::optional<std::string> message = ErrorFileMessage(text);
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) FUZZ_CHECK(!message);
  if (!message) return 0;
  FUZZ_CHECK(message->size() <= kMaxErrorFileMessage);
  if (IsValidUtf8(text)) FUZZ_CHECK(IsValidUtf8(*message));
  const bool json =
      !nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false).is_discarded();
  if (!json && text.size() <= kMaxErrorFileMessage) FUZZ_CHECK(*message == text);

  RootCause cause;
  cause.reason = CauseReason::kExited;
  cause.exit_code = 1;
  cause.message = *message;
  Job job;
  job.id = "1";
  job.root_cause = cause;
  const std::optional<Job> again = JobFromJson(nlohmann::json::parse(ToJson(job).dump()));
  FUZZ_CHECK(again.has_value() && again->root_cause.has_value());
  FUZZ_CHECK(again->root_cause->message == *message);
  return 0;
}
