// --output/--error patterns: what is refused, and each rank's path.
#include "output_pattern.h"

#include <gtest/gtest.h>

namespace ltd::test {
namespace {

TEST(OutputPattern, ExpandsJobRankAndName) {
  EXPECT_EQ(ExpandOutputPattern("/o/out-%j-%r.log", "17", 3, "bert"), "/o/out-17-3.log");
  EXPECT_EQ(ExpandOutputPattern("/o/%n.%%.log", "17", 0, "a/../b"), "/o/a_.._b.%.log");
  EXPECT_EQ(ExpandOutputPattern("/o/%n.log", "17", 0, ""), "/o/17.log") << "no name: the id";
  EXPECT_TRUE(PatternPerRank("/o/%r"));
  EXPECT_FALSE(PatternPerRank("/o/%%r"));
  EXPECT_FALSE(PatternPerRank("/o/%j.log"));
}

TEST(OutputPattern, RefusesWhatIsNoPath) {
  EXPECT_TRUE(CheckOutputPattern("--output", "out-%j-%r-%n-%%.log").ok());
  for (const std::string& bad :
       {std::string("x-%q"), std::string("x-%"), std::string(), std::string("dir/"),
        std::string("a\0b", 3), std::string(5000, 'a')}) {
    const absl::Status s = CheckOutputPattern("--output", bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_EQ(std::string(s.message()).find('\n'), std::string::npos);
    EXPECT_EQ(std::string(s.message()).rfind("--output", 0), 0u) << s.message();
  }
}

// Found by fuzz/output_pattern: the byte after a '%' was quoted as it
// came, so "%\n" or "%\x1b" put a newline or a terminal's escape in the
// refusal a user reads (and "%\xff", invalid UTF-8, in a gRPC status).
TEST(OutputPattern, RefusalQuotesTheByteEscaped) {
  EXPECT_EQ(CheckOutputPattern("--output", "out%\n").message(),
            "--output: '%\\n' is no pattern; use %j (job id), %r (rank), %n (name) or %% (a %)");
  EXPECT_EQ(CheckOutputPattern("--error", "o%\xff").message(),
            "--error: '%\\xFF' is no pattern; use %j (job id), %r (rank), %n (name) or %% (a %)");
}

}  // namespace
}  // namespace ltd::test
