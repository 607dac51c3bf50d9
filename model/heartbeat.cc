#include "heartbeat.h"

#include <charconv>

namespace ltd {
namespace {

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

bool Printable(std::string_view s) {
  for (unsigned char c : s) {
    if (c < 0x20 && c != '\t') return false;
    if (c == 0x7f) return false;
  }
  return true;
}

std::optional<int64_t> ParseStep(std::string_view arg) {
  int64_t step = 0;
  auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), step);
  if (ec != std::errc() || end != arg.data() + arg.size() || step < 0) return std::nullopt;
  return step;
}

std::optional<HeartbeatMessage> ParseAutoLine(std::string_view line) {
  const size_t space = line.find(' ');
  const std::string_view verb = line.substr(0, space);
  const std::string_view arg =
      space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  HeartbeatMessage msg;
  if (verb == "on" && arg.empty()) {
    msg.kind = HeartbeatMessage::Kind::kAutoOn;
  } else if (verb == "live" && arg.empty()) {
    msg.kind = HeartbeatMessage::Kind::kAutoLive;
  } else if (verb == "late" && arg.empty()) {
    msg.kind = HeartbeatMessage::Kind::kAutoLate;
  } else if (verb == "step") {
    msg.kind = HeartbeatMessage::Kind::kAutoStep;
    msg.step = ParseStep(arg);
    if (!msg.step) return std::nullopt;
  } else if (verb == "stacksig") {
    // Any number here: the supervisor sends only a real-time signal.
    msg.kind = HeartbeatMessage::Kind::kAutoStackSignal;
    msg.step = ParseStep(arg);
    if (!msg.step) return std::nullopt;
  } else if (verb == "stack" && Printable(arg)) {
    msg.kind = HeartbeatMessage::Kind::kAutoStack;
    msg.text = std::string(arg);
  } else {
    return std::nullopt;
  }
  return msg;
}

}  // namespace

std::optional<HeartbeatMessage> ParseHeartbeatLine(std::string_view line) {
  line = TrimRight(line);
  const size_t space = line.find(' ');
  const std::string_view verb = line.substr(0, space);
  const std::string_view arg =
      space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  HeartbeatMessage msg;
  if (verb == "hb") {
    msg.kind = HeartbeatMessage::Kind::kBeat;
    if (arg.empty()) return msg;
    msg.step = ParseStep(arg);
    if (!msg.step) return std::nullopt;
    return msg;
  }
  if (verb == "auto") return ParseAutoLine(arg);
  if (verb == "timeout") {
    auto d = ParseDuration(arg);
    if (!d) return std::nullopt;
    msg.kind = HeartbeatMessage::Kind::kTimeout;
    msg.timeout = *d;
    return msg;
  }
  if (verb == "error" || verb == "exec_failed") {
    if (!Printable(arg)) return std::nullopt;
    msg.kind =
        verb == "error" ? HeartbeatMessage::Kind::kError : HeartbeatMessage::Kind::kExecFailed;
    msg.text = std::string(arg);
    return msg;
  }
  return std::nullopt;
}

}  // namespace ltd
