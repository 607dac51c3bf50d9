// Metrics from job events, the records supervisors send and job snapshots,
// read back in the text format a scrape gets. The HTTP side is tested end to end
// (metrics_e2e_test.cc).
#include "metrics.h"

#include <gtest/gtest.h>

#include <regex>

#include "fakes.h"
#include "job_manager.h"

namespace ltd::test {
namespace {

// The value of the sample `series` (name and labels as serialized), or -1.
double Sample(const std::string& text, const std::string& series) {
  size_t at = 0;
  while ((at = text.find(series + " ", at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') return std::stod(text.substr(at + series.size() + 1));
    ++at;
  }
  return -1;
}

struct MetricsTest : ::testing::Test {
  FakeClock clock;
  std::vector<std::unique_ptr<Job>> jobs;
  Metrics::Slots slots{8, 0, 0};
  Metrics metrics{clock, Metrics::Sources{[this] {
                                            std::vector<const Job*> out;
                                            for (auto& j : jobs) out.push_back(j.get());
                                            return out;
                                          },
                                          [this] { return slots; }}};

  Job& Add(std::string user, JobState state, int running_ranks = 0) {
    auto job = std::make_unique<Job>();
    job->id = std::to_string(jobs.size() + 1);
    job->user = std::move(user);
    job->state = state;
    job->submitted_at = clock.Now();
    for (int r = 0; r < running_ranks; ++r) {
      Rank rank;
      rank.rank = r;
      rank.state = RankState::kRunning;
      job->ranks.push_back(rank);
    }
    jobs.push_back(std::move(job));
    return *jobs.back();
  }
};

TEST_F(MetricsTest, GaugesFollowTheJobsPerStateAndUser) {
  Add("alice", JobState::kPending);
  Add("alice", JobState::kPending);
  Add("bob", JobState::kRunning, 4);
  Add("bob", JobState::kFailed);
  slots = {4, 4, 0};
  metrics.Refresh();
  const std::string t = metrics.Text();
  EXPECT_EQ(Sample(t, "ltd_jobs{state=\"PENDING\"}"), 2) << t;
  EXPECT_EQ(Sample(t, "ltd_jobs{state=\"RUNNING\"}"), 1);
  EXPECT_EQ(Sample(t, "ltd_jobs{state=\"FAILED\"}"), 1);
  EXPECT_EQ(Sample(t, "ltd_jobs{state=\"LOST\"}"), 0);
  EXPECT_EQ(Sample(t, "ltd_jobs{state=\"TIMEOUT\"}"), 0) << "every state, sbatch's too";
  EXPECT_EQ(Sample(t, "ltd_user_pending_jobs{user=\"alice\"}"), 2);
  EXPECT_EQ(Sample(t, "ltd_user_pending_jobs{user=\"bob\"}"), -1) << "no series for nothing";
  EXPECT_EQ(Sample(t, "ltd_user_running_ranks{user=\"bob\"}"), 4);
  EXPECT_EQ(Sample(t, "ltd_slots{state=\"free\"}"), 4);
  EXPECT_EQ(Sample(t, "ltd_slots{state=\"busy\"}"), 4);
  EXPECT_EQ(t.find("id="), std::string::npos) << "a job id as a label";

  // bob's job ends: his series goes, not to 0 but away.
  jobs[2]->state = JobState::kSucceeded;
  metrics.OnStateChanged(*jobs[2], JobState::kRunning);
  clock.Advance(Metrics::kRefreshInterval);
  const std::string t2 = metrics.Text();
  EXPECT_EQ(Sample(t2, "ltd_user_running_ranks{user=\"bob\"}"), -1) << t2;
  EXPECT_EQ(Sample(t2, "ltd_jobs{state=\"SUCCEEDED\"}"), 1);
}

TEST_F(MetricsTest, RefreshIsRateLimited) {
  metrics.Refresh();
  Job& job = Add("alice", JobState::kPending);
  metrics.OnSubmitted(job);
  clock.Advance(Metrics::kRefreshInterval - Millis(1));
  EXPECT_EQ(Sample(metrics.Text(), "ltd_jobs{state=\"PENDING\"}"), 0);
  clock.Advance(Millis(1));
  EXPECT_EQ(Sample(metrics.Text(), "ltd_jobs{state=\"PENDING\"}"), 1);
}

TEST_F(MetricsTest, CountersAndHistogramsFromEventsAndRecords) {
  Job& job = Add("alice", JobState::kPending);
  clock.Advance(Millis(2500));
  Job before = job;
  job.state = JobState::kRunning;
  job.started_at = clock.Now();
  job.attempts.push_back(Attempt{});
  job.attempts.back().started_at = clock.Now();  // the ranks' start, as the supervisor says
  metrics.OnRecord(before, job);
  metrics.OnStateChanged(job, JobState::kPending);

  // A hang verdict 3 ms after the deadline, then the teardown, 40 ms after
  // the verdict, and a restart: as the supervisor's records tell it, one
  // change at a time or several at once.
  before = job;
  RootCause hang;
  hang.reason = CauseReason::kHang;
  hang.at = clock.Now();
  hang.deadline_at = hang.at - Millis(3);
  job.root_cause = hang;
  metrics.OnRecord(before, job);
  metrics.OnRecord(job, job);  // the same record again counts nothing
  before = job;
  job.attempts.back().root_cause = hang;
  job.attempts.back().ended_at = hang.at + Millis(40);
  job.root_cause.reset();
  job.restart_count = 1;
  job.attempts.push_back(Attempt{});
  metrics.OnRecord(before, job);
  // The second attempt exits non-zero; its teardown and the end arrive
  // with the final record (no hang verdict of its own).
  before = job;
  RootCause exited;
  exited.reason = CauseReason::kExited;
  exited.at = clock.Now();
  job.attempts.back().root_cause = exited;
  job.attempts.back().ended_at = exited.at + Millis(200);
  job.root_cause = exited;
  job.state = JobState::kFailed;
  metrics.OnRecord(before, job);
  metrics.OnStateChanged(job, JobState::kRunning);

  Job& ok = Add("bob", JobState::kSucceeded);
  metrics.OnStateChanged(ok, JobState::kRunning);
  const std::string t = metrics.Text();
  EXPECT_EQ(Sample(t, "ltd_hangs_total"), 1) << t;
  EXPECT_EQ(Sample(t, "ltd_job_restarts_total"), 1);
  EXPECT_EQ(Sample(t, "ltd_jobs_ended_total{reason=\"exited\",state=\"FAILED\"}"), 1);
  EXPECT_EQ(Sample(t, "ltd_jobs_ended_total{reason=\"none\",state=\"SUCCEEDED\"}"), 1);
  EXPECT_EQ(Sample(t, "ltd_submit_to_running_seconds_count"), 1);
  EXPECT_DOUBLE_EQ(Sample(t, "ltd_submit_to_running_seconds_sum"), 2.5);
  EXPECT_EQ(Sample(t, "ltd_submit_to_running_seconds_bucket{le=\"1\"}"), 0);
  EXPECT_EQ(Sample(t, "ltd_submit_to_running_seconds_bucket{le=\"5\"}"), 1);
  EXPECT_EQ(Sample(t, "ltd_deadline_to_verdict_seconds_count"), 1);
  EXPECT_EQ(Sample(t, "ltd_deadline_to_verdict_seconds_bucket{le=\"0.002\"}"), 0);
  EXPECT_EQ(Sample(t, "ltd_deadline_to_verdict_seconds_bucket{le=\"0.005\"}"), 1);
  EXPECT_EQ(Sample(t, "ltd_failure_to_teardown_seconds_count"), 2);
  EXPECT_EQ(Sample(t, "ltd_failure_to_teardown_seconds_bucket{le=\"0.025\"}"), 0);
  EXPECT_EQ(Sample(t, "ltd_failure_to_teardown_seconds_bucket{le=\"0.05\"}"), 1);
  EXPECT_EQ(Sample(t, "ltd_failure_to_teardown_seconds_bucket{le=\"0.25\"}"), 2);
}

TEST_F(MetricsTest, CancellationsSayWhoAskedInAWord) {
  auto cancel = [&](const std::string& owner, const std::string& by) {
    Job& job = Add(owner, JobState::kCancelled);
    RootCause c;
    c.reason = CauseReason::kCancelled;
    c.cancelled_by = by;
    job.root_cause = c;
    metrics.OnStateChanged(job, JobState::kRunning);
  };
  cancel("alice", "alice");
  cancel("bob", "root");
  cancel("carol", std::string(JobManager::kByLtd));
  cancel("dave", "");  // an older supervisor's record
  const std::string t = metrics.Text();
  const std::string series = "ltd_jobs_ended_total{cancelled_by=\"";
  EXPECT_EQ(Sample(t, series + "owner\",reason=\"cancelled\",state=\"CANCELLED\"}"), 1) << t;
  EXPECT_EQ(Sample(t, series + "other\",reason=\"cancelled\",state=\"CANCELLED\"}"), 1) << t;
  EXPECT_EQ(Sample(t, series + "ltd\",reason=\"cancelled\",state=\"CANCELLED\"}"), 1) << t;
  EXPECT_EQ(Sample(t, "ltd_jobs_ended_total{reason=\"cancelled\",state=\"CANCELLED\"}"), 1) << t;
  // No user's name becomes a label value.
  EXPECT_EQ(t.find("alice\""), std::string::npos);
}

TEST_F(MetricsTest, AnAdoptedJobsPastIsNotCountedAgain) {
  // ltd restarted: the record it loaded already shows a hang, a restart and
  // an ended attempt; the supervisor's next record adds nothing new.
  Job& job = Add("alice", JobState::kRunning);
  RootCause hang;
  hang.reason = CauseReason::kHang;
  hang.at = clock.Now();
  hang.deadline_at = hang.at;
  Attempt first;
  first.root_cause = hang;
  first.ended_at = hang.at + Millis(10);
  job.attempts = {first, Attempt{}};
  job.restart_count = 1;
  Job now = job;
  now.ranks.push_back(Rank{});  // progress only
  metrics.OnRecord(job, now);
  const std::string t = metrics.Text();
  EXPECT_EQ(Sample(t, "ltd_hangs_total"), 0) << t;
  EXPECT_EQ(Sample(t, "ltd_job_restarts_total"), 0);
  EXPECT_EQ(Sample(t, "ltd_failure_to_teardown_seconds_count"), 0);
}

TEST_F(MetricsTest, ServeRefusesAnAddressWithOneLine) {
  auto s = metrics.Serve("not an address");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--metrics-listen"), std::string::npos) << s.message();
  EXPECT_EQ(std::string(s.message()).find('\n'), std::string::npos);
}

}  // namespace
}  // namespace ltd::test
