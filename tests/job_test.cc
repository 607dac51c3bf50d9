#include "job.h"

#include <gtest/gtest.h>

namespace ltd {
namespace {

TEST(ExitCode, FollowsTheSpec) {
  RootCause c;
  c.reason = CauseReason::kExited;
  c.exit_code = 3;
  EXPECT_EQ(ExitCodeFor(c), 3);
  c.reason = CauseReason::kSignaled;
  c.signal = 11;
  EXPECT_EQ(ExitCodeFor(c), 139);
  c.reason = CauseReason::kHang;
  EXPECT_EQ(ExitCodeFor(c), 124);
  c.reason = CauseReason::kStartupTimeout;
  EXPECT_EQ(ExitCodeFor(c), 124);
  c.reason = CauseReason::kCancelled;
  EXPECT_EQ(ExitCodeFor(c), 130);
  c.reason = CauseReason::kDaemonLost;
  EXPECT_EQ(ExitCodeFor(c), 1);
  c.reason = CauseReason::kSpawnFailed;
  c.exit_code = 126;
  EXPECT_EQ(ExitCodeFor(c), 126);
}

TEST(Time, Rfc3339RoundTrip) {
  const WallTime t = WallTime(std::chrono::milliseconds(1'796'000'123'456));
  const std::string s = FormatTime(t);
  EXPECT_EQ(s, "2026-11-30T00:55:23.456000Z");
  EXPECT_EQ(ParseTime(s), t);
  EXPECT_FALSE(ParseTime("yesterday"));
  EXPECT_EQ(ParseTime("2026-11-30T00:55:23.456Z"), t);  // fewer digits read too
}

TEST(JobRecord, JsonRoundTripKeepsEverything) {
  Job job;
  job.id = "17";
  job.spec.name = "bert";
  job.spec.devices = 2;
  job.spec.argv = {"/usr/bin/python3", "train.py"};
  job.spec.heartbeat_timeout = std::chrono::milliseconds(30'000);
  job.user = "alice";
  job.state = JobState::kFailed;
  job.exit_code = 124;
  job.master_port = 29500;
  job.submitted_at = WallTime(std::chrono::seconds(1'800'000'000));
  RootCause cause;
  cause.rank = 1;
  cause.reason = CauseReason::kHang;
  cause.message = "no heartbeat";
  cause.at = job.submitted_at;
  job.root_cause = cause;
  Rank r;
  r.rank = 1;
  r.pid = 4242;
  r.state = RankState::kFailed;
  r.signal = 15;
  r.last_step = 99;
  job.ranks = {Rank{}, r};
  HangReport h;
  h.stalled_ranks = {1};
  HangReportRank rank;
  rank.rank = 1;
  rank.last_step = 99;
  rank.stalled = true;
  rank.straggler = true;
  rank.process_state = "stopped (SIGSTOP)";
  rank.stack = "#0 injected_hang";
  h.ranks = {rank};
  job.hang_report = h;
  Attempt a;
  a.master_port = 29500;
  a.root_cause = cause;
  job.attempts = {a};

  const nlohmann::json j = ToJson(job);
  EXPECT_EQ(j["root_cause"]["reason"], "hang");
  EXPECT_EQ(j["ranks"][1]["last_step"], 99);
  EXPECT_TRUE(j["ranks"][0]["last_step"].is_null());
  auto back = JobFromJson(j);
  ASSERT_TRUE(back);
  EXPECT_EQ(ToJson(*back), j);
}

TEST(JobRecord, GarbageIsRejectedNotFatal) {
  EXPECT_FALSE(JobFromJson(nlohmann::json::parse("[1,2]")));
  EXPECT_FALSE(JobFromJson(nlohmann::json::parse(R"({"id": "1", "state": "DANCING"})")));
  auto partial = JobFromJson(
      nlohmann::json::parse(R"({"id": "1", "state": "RUNNING", "ranks": [{"pid": "x"}]})"));
  ASSERT_TRUE(partial);
  EXPECT_EQ(partial->ranks.size(), 1u);
}

}  // namespace
}  // namespace ltd
