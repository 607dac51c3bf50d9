// A rank's control lines on its heartbeat fd (fd 3, docs/protocol.md;
// model/heartbeat.h), cut into reads wherever the input says. Invariants:
// however the bytes are cut, the same messages come out; each is what its
// line said, printed again and read back the same; text is bounded and
// printable; a line over 4096 bytes is reported once and never parsed.
#include <vector>

#include "fuzz_check.h"
#include "heartbeat.h"
#include "str_util.h"

using namespace ltd;

namespace {

using Kind = HeartbeatMessage::Kind;

bool Same(const HeartbeatMessage& a, const HeartbeatMessage& b) {
  return a.kind == b.kind && a.step == b.step && a.timeout == b.timeout && a.text == b.text;
}

// The line that says `m`, as a rank would write it.
std::string LineOf(const HeartbeatMessage& m) {
  const std::string step = m.step ? std::to_string(*m.step) : "";
  switch (m.kind) {
    case Kind::kBeat:
      return m.step ? "hb " + step : "hb";
    case Kind::kTimeout:
      return "timeout " + FormatDuration(m.timeout);
    case Kind::kError:
      return "error " + m.text;
    case Kind::kExecFailed:
      return "exec_failed " + m.text;
    case Kind::kAutoOn:
      return "auto on";
    case Kind::kAutoStep:
      return "auto step " + step;
    case Kind::kAutoLive:
      return "auto live";
    case Kind::kAutoLate:
      return "auto late";
    case Kind::kAutoStack:
      return "auto stack " + m.text;
    case Kind::kAutoStackSignal:
      return "auto stacksig " + step;
  }
  return "";
}

struct Seen {
  std::vector<HeartbeatMessage> messages;
  std::vector<std::string> malformed;
};

Seen FeedAll(const std::vector<std::string_view>& reads) {
  Seen seen;
  HeartbeatParser parser;
  for (std::string_view read : reads) {
    parser.Feed(
        read, [&](const HeartbeatMessage& m) { seen.messages.push_back(m); },
        [&](std::string_view why) { seen.malformed.emplace_back(why); });
  }
  return seen;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint8_t cut = in.Byte();
  const std::string_view bytes = in.Rest();

  const Seen whole = FeedAll({bytes});
  std::vector<std::string_view> reads;
  const size_t step = cut % 64 + 1;
  for (size_t at = 0; at < bytes.size(); at += step) reads.push_back(bytes.substr(at, step));
  const Seen pieces = FeedAll(reads);
  FUZZ_CHECK(whole.messages.size() == pieces.messages.size());
  for (size_t i = 0; i < whole.messages.size(); ++i) {
    FUZZ_CHECK(Same(whole.messages[i], pieces.messages[i]));
  }
  FUZZ_CHECK(whole.malformed == pieces.malformed);

  for (const std::string& why : whole.malformed) {
    FUZZ_CHECK(why.size() <= HeartbeatParser::kMaxLine);
  }
  for (const HeartbeatMessage& m : whole.messages) {
    FUZZ_CHECK(m.text.size() <= HeartbeatParser::kMaxLine);
    for (unsigned char c : m.text) FUZZ_CHECK((c >= 0x20 || c == '\t') && c != 0x7f);
    if (m.step) FUZZ_CHECK(*m.step >= 0);
    FUZZ_CHECK(m.timeout.count() >= 0 && m.timeout <= std::chrono::hours(24 * 365));
    const std::optional<HeartbeatMessage> again = ParseHeartbeatLine(LineOf(m));
    FUZZ_CHECK(again && Same(*again, m));
  }
  // The lines the parser saw, one by one, say what the stream said.
  size_t next = 0;
  std::vector<std::string_view> lines = Split(bytes, '\n');
  lines.pop_back();  // no newline yet: not read as a line
  for (std::string_view line : lines) {
    if (line.size() > HeartbeatParser::kMaxLine) continue;
    if (const auto m = ParseHeartbeatLine(line)) {
      FUZZ_CHECK(next < whole.messages.size() && Same(*m, whole.messages[next]));
      ++next;
    }
  }
  FUZZ_CHECK(next == whole.messages.size());
  return 0;
}
