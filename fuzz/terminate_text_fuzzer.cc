// What std::terminate says on a rank's stderr (model/terminate_text.h),
// read from any lines a rank writes. Invariants: the text is bounded,
// valid UTF-8 wherever the input was, and names only what a terminate
// line of the input said; no terminate line, no text.
#include <string>
#include <string_view>
#include <vector>

#include "bytes.h"
#include "fuzz_check.h"
#include "terminate_text.h"

using namespace ltd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> lines;
  for (size_t at = 0; at <= input.size();) {
    size_t end = input.find('\n', at);
    if (end == std::string_view::npos) end = input.size();
    lines.push_back(input.substr(at, end - at));
    at = end + 1;
  }
  TerminateText t;
  bool said = false;
  for (std::string_view line : lines) {
    t.Line(line);
    said = said || line.starts_with("terminate called ");
    FUZZ_CHECK(t.text().size() <= TerminateText::kMaxText);
    FUZZ_CHECK(said || t.text().empty());
    FUZZ_CHECK(t.text().empty() || t.text().starts_with("terminate called "));
    FUZZ_CHECK(t.text().find('\n') == std::string::npos);
  }
  // Valid text in, valid text out: a cut never splits a character.
  if (IsValidUtf8(input)) FUZZ_CHECK(IsValidUtf8(t.text()));
  return 0;
}
