#include "line_format.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ltworker/ltworker.h"

namespace ltworker::internal {
namespace {

std::string Heartbeat() {
  char buf[kShortLineBytes];
  return std::string(buf, FormatHeartbeat(buf));
}
std::string Step(std::int64_t step) {
  char buf[kShortLineBytes];
  return std::string(buf, FormatHeartbeatStep(step, buf));
}
std::string Timeout(std::int64_t ms) {
  char buf[kShortLineBytes];
  return std::string(buf, FormatTimeout(ms, buf));
}
std::string Error(std::string_view text) {
  std::vector<char> buf(kMaxLineBytes + 100);  // larger than allowed on purpose
  return std::string(buf.data(), FormatError(text, buf));
}

TEST(LineFormatTest, Heartbeat) { EXPECT_EQ(Heartbeat(), "hb\n"); }

TEST(LineFormatTest, HeartbeatStep) {
  EXPECT_EQ(Step(0), "hb 0\n");
  EXPECT_EQ(Step(7), "hb 7\n");
  EXPECT_EQ(Step(1234567890123), "hb 1234567890123\n");
  EXPECT_EQ(Step(std::numeric_limits<std::int64_t>::max()), "hb 9223372036854775807\n");
}

TEST(LineFormatTest, NegativeStepIsRejected) {
  char buf[kShortLineBytes];
  EXPECT_EQ(FormatHeartbeatStep(-1, buf), 0u);
}

TEST(LineFormatTest, Timeout) {
  EXPECT_EQ(Timeout(0), "timeout 0\n");
  EXPECT_EQ(Timeout(500), "timeout 500ms\n");
  EXPECT_EQ(Timeout(1000), "timeout 1s\n");
  EXPECT_EQ(Timeout(1500), "timeout 1500ms\n");
  EXPECT_EQ(Timeout(600000), "timeout 600s\n");
  EXPECT_EQ(Timeout(1), "timeout 1ms\n");
  char buf[kShortLineBytes];
  EXPECT_EQ(FormatTimeout(-1, buf), 0u);
}

// ltd rejects a timeout over a year as malformed and would ignore the line,
// leaving the old deadline; the longest one it accepts is the closest.
TEST(LineFormatTest, TimeoutOverAYearIsSentAsTheLongestLtdAccepts) {
  EXPECT_EQ(Timeout(LT_MAX_TIMEOUT_MS), "timeout 31536000s\n");
  EXPECT_EQ(Timeout(LT_MAX_TIMEOUT_MS - 1), "timeout 31535999999ms\n");
  EXPECT_EQ(Timeout(LT_MAX_TIMEOUT_MS + 1), "timeout 31536000s\n");
  EXPECT_EQ(Timeout(std::numeric_limits<std::int64_t>::max()), "timeout 31536000s\n");
}

TEST(LineFormatTest, TooSmallBufferIsRejected) {
  char buf[4];
  EXPECT_EQ(FormatHeartbeatStep(12345, buf), 0u);
  EXPECT_EQ(FormatTimeout(1000, buf), 0u);
  EXPECT_EQ(FormatError("boom", buf), 0u);
  char two[2];
  EXPECT_EQ(FormatHeartbeat(two), 0u);
}

TEST(LineFormatTest, Error) {
  EXPECT_EQ(Error("CUDA out of memory"), "error CUDA out of memory\n");
  EXPECT_EQ(Error(""), "error\n");
}

TEST(LineFormatTest, ErrorControlCharactersBecomeSpaces) {
  EXPECT_EQ(Error("Traceback:\n  File \"x\"\r\n\tboom\n"),
            "error Traceback:   File \"x\"   boom \n");
  EXPECT_EQ(Error(std::string_view("a\0b\x7f", 4)), "error a b \n");
}

TEST(LineFormatTest, ErrorNonAsciiBecomesQuestionMarks) {
  EXPECT_EQ(Error("caf\xc3\xa9"), "error caf??\n");
}

TEST(LineFormatTest, ErrorAtTheLimitIsKept) {
  const std::string text(kMaxLineBytes - 7, 'x');  // "error " + text + "\n"
  const std::string line = Error(text);
  EXPECT_EQ(line.size(), kMaxLineBytes);
  EXPECT_EQ(line, "error " + text + "\n");
}

TEST(LineFormatTest, LongErrorIsCutBelow4KiB) {
  const std::string text(100000, 'y');
  const std::string line = Error(text);
  ASSERT_EQ(line.size(), kMaxLineBytes);
  EXPECT_LT(line.size(), 4096u);
  EXPECT_EQ(line.substr(0, 6), "error ");
  EXPECT_EQ(line.substr(line.size() - 4), "...\n");
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  EXPECT_EQ(line.substr(6, line.size() - 10), std::string(kMaxLineBytes - 10, 'y'));
}

TEST(LineFormatTest, ErrorOneByteOverTheLimitIsCut) {
  const std::string line = Error(std::string(kMaxLineBytes - 6, 'z'));
  ASSERT_EQ(line.size(), kMaxLineBytes);
  EXPECT_EQ(line.substr(line.size() - 4), "...\n");
}

TEST(LineFormatTest, ErrorRespectsSmallerBuffers) {
  char buf[16];
  const std::size_t n = FormatError("0123456789abcdef", buf);
  EXPECT_EQ(std::string(buf, n), "error 012345...\n");
}

}  // namespace
}  // namespace ltworker::internal
