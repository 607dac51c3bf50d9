// User bytes as ltd shows and stores them (common/bytes.h): every job
// name, argv, env, path, rank output and error text a reply, log line or
// record carries goes through here. Invariants: display text is valid
// UTF-8 and, escaped, one line; valid UTF-8 kept as it is; a cut text fits
// its limit, and cut bytes are the input's own up to a character's start;
// bytes stored as JSON read back byte for byte.
#include <nlohmann/json.hpp>

#include "bytes.h"
#include "fuzz_check.h"

using namespace ltd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const size_t limit = in.Byte() * 4;
  const std::string_view bytes = in.Rest();

  const std::string kept = DisplayEscape(bytes);
  FUZZ_CHECK(IsValidUtf8(kept));
  if (IsValidUtf8(bytes)) FUZZ_CHECK(kept == bytes);
  const std::string line = DisplayEscape(bytes, Controls::kEscape);
  FUZZ_CHECK(fuzz::IsOneLine(line, SIZE_MAX));
  const std::string lines = DisplayEscape(bytes, Controls::kKeepNewlines);
  FUZZ_CHECK(IsValidUtf8(lines));
  for (unsigned char c : lines) FUZZ_CHECK((c >= 0x20 || c == '\t' || c == '\n') && c != 0x7f);

  size_t consumed = 0;
  const std::string prefix = DisplayEscapePrefix(bytes, limit, &consumed, Controls::kEscape);
  FUZZ_CHECK(consumed <= bytes.size() && prefix.size() <= limit);
  FUZZ_CHECK(prefix == DisplayEscape(bytes.substr(0, consumed), Controls::kEscape));
  const std::string elided = DisplayEscapeElided(bytes, limit, Controls::kEscape);
  FUZZ_CHECK(fuzz::IsOneLine(elided, limit + ElisionMark(bytes.size()).size()));
  if (line.size() <= limit) FUZZ_CHECK(elided == line);
  const std::string logged = ForLog(bytes);
  FUZZ_CHECK(fuzz::IsOneLine(logged, 512 + ElisionMark(bytes.size()).size()));

  // Bytes cut (a root cause's message): within the limit, the input's own
  // first bytes then the mark of the rest, never inside a character.
  const size_t max = limit + 32;
  const std::string cut = CutElided(bytes, max);
  FUZZ_CHECK(cut.size() <= max);
  if (bytes.size() <= max) {
    FUZZ_CHECK(cut == bytes);
  } else {
    const size_t mark = cut.rfind("… [+");
    FUZZ_CHECK(mark != std::string::npos);
    FUZZ_CHECK(cut.substr(mark) == ElisionMark(bytes.size() - mark));
    FUZZ_CHECK(bytes.substr(0, mark) == cut.substr(0, mark));
    if (IsValidUtf8(bytes)) FUZZ_CHECK(IsValidUtf8(cut));
  }

  const nlohmann::json j = BytesToJson(bytes);
  const std::string text = j.dump();  // throws on invalid UTF-8: must not
  const nlohmann::json back = nlohmann::json::parse(text);
  FUZZ_CHECK(BytesFromJson(back) == std::string(bytes));

  // Any JSON at all, as a record's field: bytes or nothing, never a throw.
  const nlohmann::json any = nlohmann::json::parse(bytes, nullptr, false);
  if (!any.is_discarded()) {
    if (const std::optional<std::string> b = BytesFromJson(any)) {
      FUZZ_CHECK(BytesFromJson(nlohmann::json::parse(BytesToJson(*b).dump())) == b);
    }
  }
  return 0;
}
