// The heartbeat parser must take anything a rank writes: every valid line
// is understood, everything else is counted and skipped, memory stays
// bounded, and how the bytes are split never changes the result.
#include "heartbeat.h"

#include <gtest/gtest.h>

#include <random>

namespace ltd {
namespace {

struct Collected {
  std::vector<std::string> messages;
  int malformed = 0;
};

std::string Describe(const HeartbeatMessage& m) {
  switch (m.kind) {
    case HeartbeatMessage::Kind::kBeat:
      return m.step ? "hb " + std::to_string(*m.step) : "hb";
    case HeartbeatMessage::Kind::kTimeout:
      return "timeout " + std::to_string(m.timeout.count());
    case HeartbeatMessage::Kind::kError:
      return "error " + m.text;
    case HeartbeatMessage::Kind::kExecFailed:
      return "exec_failed " + m.text;
    case HeartbeatMessage::Kind::kAutoOn:
      return "auto on";
    case HeartbeatMessage::Kind::kAutoStep:
      return "auto step " + std::to_string(*m.step);
    case HeartbeatMessage::Kind::kAutoLive:
      return "auto live";
    case HeartbeatMessage::Kind::kAutoLate:
      return "auto late";
    case HeartbeatMessage::Kind::kAutoStack:
      return "auto stack " + m.text;
    case HeartbeatMessage::Kind::kAutoStackSignal:
      return "auto stacksig " + std::to_string(*m.step);
  }
  return "?";
}

Collected Feed(HeartbeatParser& p, std::string_view bytes) {
  Collected c;
  p.Feed(
      bytes, [&](const HeartbeatMessage& m) { c.messages.push_back(Describe(m)); },
      [&](std::string_view) { ++c.malformed; });
  return c;
}

TEST(HeartbeatLine, ValidLines) {
  EXPECT_EQ(Describe(*ParseHeartbeatLine("hb")), "hb");
  EXPECT_EQ(Describe(*ParseHeartbeatLine("hb 0")), "hb 0");
  EXPECT_EQ(Describe(*ParseHeartbeatLine("hb 9223372036854775807")), "hb 9223372036854775807");
  EXPECT_EQ(Describe(*ParseHeartbeatLine("hb 7\r")), "hb 7");  // CRLF writers
  EXPECT_EQ(Describe(*ParseHeartbeatLine("timeout 30s")), "timeout 30000");
  EXPECT_EQ(Describe(*ParseHeartbeatLine("timeout 0")), "timeout 0");
  EXPECT_EQ(Describe(*ParseHeartbeatLine("error NCCL error: unhandled cuda error")),
            "error NCCL error: unhandled cuda error");
}

// The worker runtimes send a longer timeout as LT_MAX_TIMEOUT_MS
// (ltworker.h), "timeout 31536000s": it must be the longest one accepted.
TEST(HeartbeatLine, TheLongestTimeoutTheRuntimesSendIsAccepted) {
  EXPECT_EQ(Describe(*ParseHeartbeatLine("timeout 31536000s")), "timeout 31536000000");
  EXPECT_EQ(Describe(*ParseHeartbeatLine("timeout 1ms")), "timeout 1");
  EXPECT_FALSE(ParseHeartbeatLine("timeout 31536000001ms"));
}

TEST(HeartbeatLine, MalformedLines) {
  for (const char* bad : {"", "HB", "hb -1", "hb 1.5", "hb x", "hb 99999999999999999999", "timeout",
                          "timeout soon", "timeout -1s", "beat", "hb 1 2", "error bell\a"}) {
    EXPECT_FALSE(ParseHeartbeatLine(bad)) << bad;
  }
}

TEST(HeartbeatParser, SplitAnywhereGivesTheSameMessages) {
  const std::string stream = "hb 1\nhb 2\ntimeout 5s\nerror boom\nhb\n";
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    HeartbeatParser p;
    Collected a = Feed(p, std::string_view(stream).substr(0, cut));
    Collected b = Feed(p, std::string_view(stream).substr(cut));
    a.messages.insert(a.messages.end(), b.messages.begin(), b.messages.end());
    EXPECT_EQ(a.messages,
              (std::vector<std::string>{"hb 1", "hb 2", "timeout 5000", "error boom", "hb"}))
        << cut;
    EXPECT_EQ(a.malformed + b.malformed, 0);
  }
}

TEST(HeartbeatParser, OneMiBLineIsDroppedOnceAndTheNextLineStillParses) {
  HeartbeatParser p;
  const std::string huge(1 << 20, 'x');
  Collected c = Feed(p, "hb 1\n" + huge);
  Collected d = Feed(p, huge + "\nhb 2\n");
  EXPECT_EQ(c.messages, std::vector<std::string>{"hb 1"});
  EXPECT_EQ(c.malformed, 1);  // reported once, not per piece
  EXPECT_EQ(d.messages, std::vector<std::string>{"hb 2"});
  EXPECT_EQ(d.malformed, 0);
}

TEST(HeartbeatParser, LineOfExactlyTheLimitIsAccepted) {
  HeartbeatParser p;
  const std::string text = "error " + std::string(HeartbeatParser::kMaxLine - 6, 'e');
  Collected c = Feed(p, text + "\n");
  ASSERT_EQ(c.messages.size(), 1u);
  EXPECT_EQ(c.malformed, 0);
}

TEST(HeartbeatParser, RandomBytesNeverCrashAndValidLinesSurvive) {
  std::mt19937 rng(42);
  for (int round = 0; round < 200; ++round) {
    std::string noise(rng() % 5000, '\0');
    for (char& ch : noise) ch = static_cast<char>(rng() % 256);
    HeartbeatParser p;
    // Noise, then a newline to end whatever line it left open, then a beat.
    std::string stream = noise + "\nhb 77\n";
    std::vector<std::string> got;
    size_t pos = 0;
    while (pos < stream.size()) {
      const size_t n = std::min<size_t>(stream.size() - pos, 1 + rng() % 700);
      Collected c = Feed(p, std::string_view(stream).substr(pos, n));
      got.insert(got.end(), c.messages.begin(), c.messages.end());
      pos += n;
    }
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(got.back(), "hb 77") << round;
  }
}

TEST(LineSplitter, LongOutputLinesAreCutNotLost) {
  LineSplitter s(8);
  std::vector<std::string> lines;
  std::vector<bool> overlong;
  auto fn = [&](std::string_view line, bool o) {
    lines.emplace_back(line);
    overlong.push_back(o);
  };
  s.Feed("abcdefghij\nxy", fn);
  s.Finish(fn);
  EXPECT_EQ(lines, (std::vector<std::string>{"abcdefgh", "ij", "xy"}));
  EXPECT_EQ(overlong, (std::vector<bool>{true, true, false}));
}

// Found by fuzz/heartbeat: a line exactly the limit long was a line when
// it came in one read, and overlong when a read ended right after it (its
// newline in the next read): a rank's 4096-byte `error` line was dropped
// or kept by chance.
TEST(LineSplitter, ALineOfTheLimitIsALineWhereverReadsEnd) {
  for (size_t cut = 1; cut <= 10; ++cut) {
    LineSplitter s(8);
    std::vector<std::string> lines;
    std::vector<bool> overlong;
    auto fn = [&](std::string_view line, bool o) {
      lines.emplace_back(line);
      overlong.push_back(o);
    };
    const std::string data = "abcdefgh\nxy\n";
    for (size_t at = 0; at < data.size(); at += cut) s.Feed(data.substr(at, cut), fn);
    EXPECT_EQ(lines, (std::vector<std::string>{"abcdefgh", "xy"})) << cut;
    EXPECT_EQ(overlong, (std::vector<bool>{false, false})) << cut;
  }
}

}  // namespace
}  // namespace ltd
