// An attach's events from stored lines: each line's rank, stream and text,
// where in the log it ends, the log's identity once, ltd's cut marker as a
// notice that blames the job's log budget, batched or one event a line.
#include "stored_lines.h"

#include <gtest/gtest.h>

#include "job_log.h"

namespace ltd::test {
namespace {

TEST(StoredLines, EachLineWithItsRankStreamAndPlace) {
  const std::string out = LogStamp(WallTime(std::chrono::seconds(1764608523)));
  std::string err = out;
  MarkStderr(err);
  const std::string chunk = out + "[0] a\n" + err + "[12] b c\n" + CutMarker(4096) + "[1] old\n";
  std::vector<v1::JobEvent> events;
  StoredLinesToEvents(chunk, 1000 + chunk.size(), 77, /*batched=*/false, &events);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].at().log_id(), 77u);
  EXPECT_EQ(events[1].at().log_id(), 0u);
  EXPECT_EQ(events[0].output().rank(), 0);
  EXPECT_FALSE(events[0].output().stderr());
  EXPECT_EQ(events[0].output().data(), "a");
  EXPECT_EQ(events[0].at().offset(), 1000 + out.size() + 6);
  EXPECT_EQ(events[1].output().rank(), 12);
  EXPECT_TRUE(events[1].output().stderr());
  EXPECT_EQ(events[1].output().data(), "b c");
  EXPECT_EQ(events[2].notice(),
            "ltd: the job's log dropped 4096 bytes of output here at its budget "
            "(--job-max-log-bytes); its head and tail are kept");
  EXPECT_EQ(events[3].output().data(), "old");  // a line of an older log, unstamped
  EXPECT_EQ(events[3].at().offset(), 1000 + chunk.size());

  events.clear();
  StoredLinesToEvents(chunk, chunk.size(), 0, /*batched=*/true, &events);
  ASSERT_EQ(events.size(), 3u);  // two lines, the notice, one line
  EXPECT_EQ(events[0].lines().lines_size(), 2);
  EXPECT_EQ(events[0].lines().lines(1).data(), "b c");
  EXPECT_TRUE(events[0].lines().lines(1).stderr());
  EXPECT_EQ(events[0].at().offset(), 2 * out.size() + 6 + 9);
  EXPECT_EQ(events[1].at().offset(), chunk.size() - 8);
  EXPECT_EQ(events[2].lines().lines(0).rank(), 1);
}

// A cut whose lines the log counted is told in lines too.
TEST(StoredLines, ACutIsToldInLinesWhenTheLogCountedThem) {
  std::vector<v1::JobEvent> events;
  const std::string chunk = CutMarker(4096, 80);
  StoredLinesToEvents(chunk, chunk.size(), 0, /*batched=*/true, &events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].notice(),
            "ltd: the job's log dropped 80 lines (4096 bytes) of output here at its budget "
            "(--job-max-log-bytes); its head and tail are kept");
}

}  // namespace
}  // namespace ltd::test
