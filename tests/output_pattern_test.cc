// --output/--error patterns: what is refused, each rank's path, and the
// meaning a job submitted before sbatch's fields keeps.
#include "output_pattern.h"

#include <gtest/gtest.h>

#include "job.h"

namespace ltd::test {
namespace {

std::string Expand(std::string_view pattern, const PatternValues& v,
                   int version = kSbatchPatterns) {
  auto parsed = ParseOutputPattern("--output", pattern, version);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? ExpandOutputPattern(*parsed, v) : "";
}

PatternValues Values(std::string_view job_id, std::string_view name, std::string_view host = "") {
  PatternValues v;
  v.job_id = job_id;
  v.name = name;
  v.host = host;
  return v;
}

const PatternValues kValues = [] {
  PatternValues v = Values("17", "bert", "gpu7.cluster.example");
  v.rank = 11;
  v.local_rank = 3;
  v.node = 2;
  v.user = "alice";
  return v;
}();

TEST(OutputPattern, ExpandsSbatchFields) {
  EXPECT_EQ(Expand("/o/%j-%x-%t-%n-%N-%u-%r.log", kValues), "/o/17-bert-11-2-gpu7-alice-3.log");
  EXPECT_EQ(Expand("/o/%x.%%.%%n.log", Values("17", "a/../b")), "/o/a_.._b.%.%n.log");
  EXPECT_EQ(Expand("/o/%x.log", Values("17", "")), "/o/17.log") << "no name: the id";
  EXPECT_EQ(Expand("/o/%N", Values("", "", "a/b")), "/o/a_b");
}

// A job submitted before (its record without output_patterns) keeps %n as
// its name; the fields it did not have are refused there as they were.
TEST(OutputPattern, LegacyRecordsKeepNAsTheName) {
  EXPECT_EQ(Expand("/o/%n-%j-%r.log", kValues, kLegacyPatterns), "/o/bert-17-3.log");
  EXPECT_FALSE(CheckOutputPattern("--output", "/o/%x", kLegacyPatterns).ok());

  Job job;
  job.id = "5";
  job.spec.output = "/o/%n.log";
  nlohmann::json record = ToJson(job);
  EXPECT_EQ(record.value("output_patterns", 0), kSbatchPatterns);
  EXPECT_EQ(JobFromJson(record)->spec.output_patterns, kSbatchPatterns);
  record.erase("output_patterns");  // as a release before wrote it
  EXPECT_EQ(JobFromJson(record)->spec.output_patterns, kLegacyPatterns);
}

TEST(OutputPattern, PerRankAndKnownBeforeTheJob) {
  auto per_rank = [](std::string_view p) { return PatternPerRank(*ParseOutputPattern("-o", p)); };
  EXPECT_TRUE(per_rank("/o/%t"));
  EXPECT_TRUE(per_rank("/o/%r"));
  EXPECT_FALSE(per_rank("/o/%%t"));
  EXPECT_FALSE(per_rank("/o/%j-%n.log"));
  auto needs = [](std::string_view p, bool named) {
    return PatternNeedsJob(*ParseOutputPattern("-o", p), named);
  };
  EXPECT_FALSE(needs("out-%t-%x.log", true));
  EXPECT_TRUE(needs("out-%x.log", false));
  for (const char* p : {"o-%j", "o-%n", "o-%N", "o-%u"}) EXPECT_TRUE(needs(p, true)) << p;
}

TEST(OutputPattern, RefusesWhatIsNoPath) {
  EXPECT_TRUE(CheckOutputPattern("--output", "out-%j-%t-%n-%N-%u-%x-%r-%%.log").ok());
  for (const std::string& bad :
       {std::string("x-%q"), std::string("x-%"), std::string(), std::string("dir/"),
        std::string("a\0b", 3), std::string(5000, 'a'), std::string("x-%\xff"),
        std::string("x-%\n")}) {
    const absl::Status s = CheckOutputPattern("--output", bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_EQ(std::string(s.message()).find('\n'), std::string::npos);
    EXPECT_EQ(std::string(s.message()).rfind("--output", 0), 0u) << s.message();
  }
  EXPECT_NE(CheckOutputPattern("-o", "x-%\xff").message().find("'%\\xff'"), std::string::npos);
}

// Found by fuzz/output_pattern: the byte after a '%' was quoted as it
// came, so "%\n" or "%\x1b" put a newline or a terminal's escape in the
// refusal a user reads (and "%\xff", invalid UTF-8, in a gRPC status).
TEST(OutputPattern, RefusalQuotesTheByteEscaped) {
  const std::string use =
      " is no pattern; use %j (job id), %x (name), %t (rank), %n (node), %N (host), %u (user), "
      "%A (array id), %a (array task) or %% (a %)";
  EXPECT_EQ(CheckOutputPattern("--output", "out%\n").message(), "--output: '%\\x0a'" + use);
  EXPECT_EQ(CheckOutputPattern("--error", "o%\xff").message(), "--error: '%\\xff'" + use);
}

}  // namespace
// sbatch's %A and %a: an array task's files are its own; a job that is
// no array task has its own id as %A.
TEST(OutputPattern, ArrayFields) {
  auto p = ParseOutputPattern("--output", "/o/%A_%a-%j.log");
  ASSERT_TRUE(p.ok()) << p.status();
  PatternValues v;
  v.job_id = "14";
  v.array_job_id = "12";
  v.array_task_id = "2";
  EXPECT_EQ(ExpandOutputPattern(*p, v), "/o/12_2-14.log");
  EXPECT_TRUE(PatternHasArrayTask(*p));
  EXPECT_TRUE(PatternNeedsJob(*p, true));
  PatternValues plain;
  plain.job_id = "9";
  auto a = ParseOutputPattern("--output", "/o/%A.log");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(ExpandOutputPattern(*a, plain), "/o/9.log");
  EXPECT_FALSE(PatternHasArrayTask(*a));
  // A record of the release before has no %A.
  EXPECT_FALSE(ParseOutputPattern("--output", "/o/%A", kLegacyPatterns).ok());
}

}  // namespace ltd::test
