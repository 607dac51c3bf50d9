// Logging at a bounded rate per job, with a fake clock: one job's flood is
// cut at its budget while other jobs' lines pass, what was dropped is said
// once the job may speak again, and the table of jobs stays bounded.
#include "log_rate.h"

#include <gtest/gtest.h>

#include <sstream>

#include "spdlog/sinks/ostream_sink.h"

namespace ltd::test {
namespace {

class LogRateTest : public ::testing::Test {
 protected:
  LogRateTest() {
    auto inner = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    sink_ = std::make_shared<RateLimitedSink>(inner, LogRate{10, 20}, LogRate{100, 200},
                                              [this] { return now_; });
    logger_ = std::make_shared<spdlog::logger>("test", sink_);
    logger_->set_pattern("%l %v");
  }
  std::vector<std::string> Lines() {
    std::vector<std::string> lines;
    std::istringstream in(out_.str());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    out_.str("");
    return lines;
  }
  size_t Count(const std::vector<std::string>& lines, const std::string& part) {
    return static_cast<size_t>(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.find(part) != std::string::npos;
    }));
  }

  std::ostringstream out_;
  std::chrono::steady_clock::time_point now_{};
  std::shared_ptr<RateLimitedSink> sink_;
  std::shared_ptr<spdlog::logger> logger_;
};

TEST_F(LogRateTest, AJobsFloodIsCutAtItsBudgetAndOthersPass) {
  for (int i = 0; i < 1000; ++i) logger_->info("job=7 rank=0 auto {}", i % 2 ? "on" : "off");
  logger_->info("job=8 submitted");
  logger_->info("listening");
  std::vector<std::string> lines = Lines();
  EXPECT_EQ(Count(lines, "job=7 rank=0"), 20u);  // the burst
  EXPECT_EQ(Count(lines, "job=8 submitted"), 1u);
  EXPECT_EQ(Count(lines, "listening"), 1u);
  EXPECT_EQ(Count(lines, "dropped"), 0u);

  now_ += std::chrono::milliseconds(500);  // 5 lines' worth
  for (int i = 0; i < 100; ++i) logger_->info("job=7 rank=0 auto on");
  lines = Lines();
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[0], "warning job=7 980 log line(s) dropped: over 10 a second");
  EXPECT_EQ(Count(lines, "job=7 rank=0"), 5u);
}

TEST_F(LogRateTest, CriticalLinesAlwaysPassAndFlushSaysWhatWasDropped) {
  for (int i = 0; i < 30; ++i) logger_->error("job=3 cannot write its log");
  logger_->critical("job=3 state dir gone");
  logger_->flush();
  std::vector<std::string> lines = Lines();
  EXPECT_EQ(Count(lines, "cannot write"), 20u);
  EXPECT_EQ(Count(lines, "critical job=3 state dir gone"), 1u);
  EXPECT_EQ(Count(lines, "job=3 10 log line(s) dropped"), 1u);
}

TEST_F(LogRateTest, TheTableOfJobsStaysBounded) {
  // More jobs than the table holds, each flooding: the ones past it share
  // the count of lines of no job, which is bounded too.
  for (size_t j = 0; j < 3 * RateLimitedSink::kMaxKeys; ++j) {
    for (int i = 0; i < 30; ++i) logger_->info("job={} line", j);
  }
  const std::vector<std::string> lines = Lines();
  EXPECT_LE(lines.size(), RateLimitedSink::kMaxKeys * 20 + 200 + 10);
  EXPECT_GE(lines.size(), RateLimitedSink::kMaxKeys * 20);
}

}  // namespace
}  // namespace ltd::test
