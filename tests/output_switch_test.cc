// The output switch of one supervisor (daemon/output_switch.h) without a
// supervisor: what it asks, when it says output flows again, how toggles
// coalesce, and how it takes a failure, a stale answer and a supervisor of
// a release before SetOutput.
#include "output_switch.h"

#include <gtest/gtest.h>

namespace ltd::test {
namespace {

using Answer = OutputSwitch::Answer;

// A switch whose first watch brought its first record.
OutputSwitch Watching() {
  OutputSwitch s("7");
  s.NewWatch();
  (void)s.OnRecord();
  return s;
}

TEST(OutputSwitch, NothingIsAskedBeforeTheWatchBroughtARecord) {
  OutputSwitch s("7");
  s.NewWatch();
  OutputSwitch::Actions a = s.Want(false);
  EXPECT_FALSE(a.ask.has_value());
  EXPECT_FALSE(a.resumed);
  a = s.OnRecord();
  EXPECT_EQ(a.ask, false);
  EXPECT_FALSE(a.resumed);
  EXPECT_TRUE(s.call_in_flight());
  a = s.Answered(Answer::kOk, false, s.generation());
  EXPECT_FALSE(a.ask.has_value());
  EXPECT_FALSE(a.resumed);
  EXPECT_FALSE(s.on());
}

TEST(OutputSwitch, AWatchThatStartsWithOutputWantedSaysItFlows) {
  OutputSwitch s("7");
  s.NewWatch();
  OutputSwitch::Actions a = s.OnRecord();
  EXPECT_FALSE(a.ask.has_value());
  EXPECT_TRUE(a.resumed);
  // Once: later records say nothing.
  a = s.OnRecord();
  EXPECT_FALSE(a.resumed);
  EXPECT_FALSE(a.ask.has_value());
}

TEST(OutputSwitch, OnAgainFlowsOnceTheSupervisorSaidSo) {
  OutputSwitch s = Watching();
  ASSERT_EQ(s.Want(false).ask, false);
  EXPECT_FALSE(s.Answered(Answer::kOk, false, s.generation()).resumed);
  OutputSwitch::Actions a = s.Want(true);
  EXPECT_EQ(a.ask, true);
  EXPECT_FALSE(a.resumed);  // not before the answer
  a = s.Answered(Answer::kOk, true, s.generation());
  EXPECT_TRUE(a.resumed);
  EXPECT_TRUE(s.on());
}

TEST(OutputSwitch, TogglesCoalesceIntoTheLatestWish) {
  OutputSwitch s = Watching();
  ASSERT_EQ(s.Want(false).ask, false);
  EXPECT_FALSE(s.Want(true).ask.has_value());  // one call at a time
  EXPECT_FALSE(s.Want(false).ask.has_value());
  EXPECT_FALSE(s.Want(true).ask.has_value());
  // Answered off, but on is wanted now: asked at once.
  OutputSwitch::Actions a = s.Answered(Answer::kOk, false, s.generation());
  EXPECT_EQ(a.ask, true);
  EXPECT_FALSE(a.resumed);
  a = s.Answered(Answer::kOk, true, s.generation());
  EXPECT_TRUE(a.resumed);
  EXPECT_FALSE(a.ask.has_value());
}

TEST(OutputSwitch, OffThenOnBeforeAnyAskAsksNothing) {
  OutputSwitch s("7");
  s.NewWatch();
  EXPECT_FALSE(s.Want(false).ask.has_value());
  OutputSwitch::Actions a = s.Want(true);
  EXPECT_FALSE(a.ask.has_value());
  EXPECT_TRUE(a.resumed);  // it never stopped
  a = s.OnRecord();
  EXPECT_FALSE(a.ask.has_value());
}

TEST(OutputSwitch, AFailedCallIsAskedAgainWithTheNextRecord) {
  OutputSwitch s = Watching();
  ASSERT_EQ(s.Want(false).ask, false);
  OutputSwitch::Actions a = s.Answered(Answer::kFailed, false, s.generation(), "deadline");
  EXPECT_FALSE(a.ask.has_value());
  EXPECT_TRUE(s.on());  // as far as ltd knows, it still sends
  a = s.OnRecord();
  EXPECT_EQ(a.ask, false);
  a = s.Answered(Answer::kOk, false, s.generation());
  EXPECT_FALSE(a.ask.has_value());
  EXPECT_FALSE(s.on());
  EXPECT_FALSE(s.OnRecord().ask.has_value());
}

TEST(OutputSwitch, AnAnswerFromAWatchBeforeIsStale) {
  OutputSwitch s = Watching();
  const uint64_t first = s.generation();
  ASSERT_EQ(s.Want(false).ask, false);
  s.NewWatch();  // the stream broke and was watched again: output on
  OutputSwitch::Actions a = s.Answered(Answer::kOk, false, first);
  EXPECT_FALSE(a.ask.has_value());  // not before the new watch's record
  EXPECT_TRUE(s.on());
  a = s.OnRecord();
  EXPECT_EQ(a.ask, false);
  EXPECT_FALSE(s.Answered(Answer::kOk, false, s.generation()).ask.has_value());
  EXPECT_FALSE(s.on());
}

TEST(OutputSwitch, ASupervisorWithoutSetOutputIsNeverAskedAgain) {
  OutputSwitch s = Watching();
  ASSERT_EQ(s.Want(false).ask, false);
  OutputSwitch::Actions a = s.Answered(Answer::kUnimplemented, false, s.generation());
  EXPECT_FALSE(a.resumed);  // output is not wanted
  EXPECT_TRUE(s.unsupported());
  EXPECT_TRUE(s.on());
  a = s.Want(true);
  EXPECT_FALSE(a.ask.has_value());
  EXPECT_TRUE(a.resumed);
  EXPECT_FALSE(s.Want(false).ask.has_value());
  EXPECT_FALSE(s.OnRecord().ask.has_value());
}

TEST(OutputSwitch, AWatchFromTheJobsStartResumesWithNothingMissed) {
  OutputSwitch s("7");
  s.NewWatch(/*from_start=*/true);
  OutputSwitch::Actions a = s.OnRecord();
  EXPECT_TRUE(a.resumed);
  EXPECT_FALSE(a.missed);  // the job's first line comes after it
  // Off and on again: lines may have gone to the log alone meanwhile.
  ASSERT_EQ(s.Want(false).ask, false);
  EXPECT_FALSE(s.Answered(Answer::kOk, false, s.generation()).resumed);
  ASSERT_EQ(s.Want(true).ask, true);
  a = s.Answered(Answer::kOk, true, s.generation());
  EXPECT_TRUE(a.resumed);
  EXPECT_TRUE(a.missed);
  // The stream broke and was watched again: the gap is in the log.
  s.NewWatch();
  a = s.OnRecord();
  EXPECT_TRUE(a.resumed);
  EXPECT_TRUE(a.missed);
}

TEST(OutputSwitch, OnAgainBeforeAnyAskMissedNothing) {
  OutputSwitch s("7");
  s.NewWatch();
  EXPECT_FALSE(s.Want(false).ask.has_value());
  OutputSwitch::Actions a = s.Want(true);
  EXPECT_TRUE(a.resumed);
  EXPECT_FALSE(a.missed);  // it never stopped
}

}  // namespace
}  // namespace ltd::test
