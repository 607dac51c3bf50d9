// --after and pending reasons through the job table, with in-process
// supervision over the fake launcher and clock: what waits, what starts, what is cancelled unrun,
// what is refused, and what `ps`/`show` say a pending job waits for.
#include "dependencies.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "fakes.h"
#include "job_manager.h"
#include "local_host.h"
#include "manager_fixture.h"

namespace ltd::test {
namespace {

TEST(Dependencies, ReadyOnlyOnceEveryDependencySucceeded) {
  Dependencies d;
  d.Add("3", 1000, {"1", "2"});
  EXPECT_TRUE(d.Waiting("3"));
  EXPECT_EQ(d.waiting(1000), 1u);
  EXPECT_EQ(d.Unmet("3"), (std::vector<std::string>{"1", "2"}));
  EXPECT_TRUE(d.Ended("1", true).ready.empty());
  EXPECT_EQ(d.Unmet("3"), std::vector<std::string>{"2"});
  EXPECT_EQ(d.Ended("2", true).ready, std::vector<std::string>{"3"});
  EXPECT_FALSE(d.Waiting("3"));
  EXPECT_EQ(d.waiting(1000), 0u);
}

TEST(Dependencies, OneFailureFailsEveryWaiterOnceAndForgetsThem) {
  Dependencies d;
  d.Add("10", 1, {"2", "9"});
  d.Add("11", 2, {"9"});
  auto out = d.Ended("9", false);
  EXPECT_EQ(out.failed, (std::vector<std::string>{"10", "11"}));
  EXPECT_FALSE(d.Waiting("10"));
  // "2" ending later finds nobody waiting for it any more.
  EXPECT_TRUE(d.Ended("2", true).ready.empty());
  EXPECT_TRUE(d.Ended("2", false).failed.empty());
}

TEST(Dependencies, RemovedWaiterIsNeverReady) {
  Dependencies d;
  d.Add("5", 1, {"4"});
  d.Remove("5");
  EXPECT_TRUE(d.Ended("4", true).ready.empty());
}

class AfterTest : public ManagerFixture {
 protected:
  AfterTest() : ManagerFixture("after") { Reset(4); }

  void Reset(int slots, int user_max_running = 0, int user_max_pending = 1000) {
    ManagerConfig config;
    config.placement.slots = slots;
    config.placement.user_max_running_jobs = user_max_running;
    config.placement.user_max_pending_jobs = user_max_pending;
    RunnerConfig runner;
    runner.restart_backoff = Millis(0);
    Make(config, runner);
  }
  absl::Status Kill(const std::string& id) {
    std::optional<absl::Status> answer;
    manager_->Kill(id, KillOrder::Teardown("alice"), [&](absl::Status s) { answer = s; });
    return answer.value_or(absl::InternalError("no answer"));
  }
  JobSpec Spec(int devices, std::vector<std::string> after = {}, uid_t uid = getuid()) {
    JobSpec s;
    s.devices = devices;
    s.argv = {"/bin/true"};
    s.cwd = "/";
    s.uid = uid;
    s.gid = getgid();
    s.grace = Millis(1000);
    s.after = std::move(after);
    return s;
  }
  void Succeed(const std::string& id) {
    for (int r = 0; r < Get(id).spec.devices; ++r) launcher_.Exit(id, r, 0);
    clock_.Advance(Millis(0));
  }
  void FailRank0(const std::string& id) {
    launcher_.Exit(id, 0, 3);
    launcher_.ExitSignalled(id);
    clock_.Advance(Millis(0));
  }
};

TEST_F(AfterTest, StartsOnceItsDependencySucceeded) {
  const std::string first = Submit(Spec(1));
  const std::string second = Submit(Spec(1, {first}));
  EXPECT_EQ(Get(second).state, JobState::kPending);
  EXPECT_EQ(manager_->PendingReason(Get(second)), "after job " + first);
  EXPECT_EQ(Get(second).spec.after, std::vector<std::string>{first});
  Succeed(first);
  EXPECT_EQ(Get(second).state, JobState::kRunning);
  Succeed(second);
  EXPECT_EQ(Get(second).state, JobState::kSucceeded);
}

TEST_F(AfterTest, ByNameAndSeveralDependencies) {
  JobSpec named = Spec(1);
  named.name = "prep";
  const std::string prep = Submit(named);
  const std::string other = Submit(Spec(1));
  const std::string last = Submit(Spec(1, {"prep", other, prep}));
  EXPECT_EQ(Get(last).spec.after, (std::vector<std::string>{prep, other}));
  EXPECT_EQ(manager_->PendingReason(Get(last)), "after jobs " + prep + ", " + other);
  Succeed(other);
  EXPECT_EQ(manager_->PendingReason(Get(last)), "after job " + prep);
  Succeed(prep);
  EXPECT_EQ(Get(last).state, JobState::kRunning);
}

TEST_F(AfterTest, FailureCancelsTheWholeChainUnrun) {
  const std::string a = Submit(Spec(1));
  const std::string b = Submit(Spec(1, {a}));
  const std::string c = Submit(Spec(1, {b}));
  const size_t spawned = launcher_.procs.size();
  FailRank0(a);
  EXPECT_EQ(Get(a).state, JobState::kFailed);
  clock_.Advance(Millis(0));  // each link one loop turn
  clock_.Advance(Millis(0));
  for (const std::string& id : {b, c}) {
    const Job& job = Get(id);
    EXPECT_EQ(job.state, JobState::kCancelled) << id;
    ASSERT_TRUE(job.root_cause);
    EXPECT_EQ(job.root_cause->reason, CauseReason::kDependencyFailed);
    EXPECT_EQ(job.exit_code, 1);
  }
  EXPECT_EQ(Get(b).root_cause->message, "job " + a + ", which it was to run after, ended FAILED");
  EXPECT_EQ(launcher_.procs.size(), spawned) << "a job ran after a failed dependency";
  EXPECT_EQ(clock_.pending_timers(), 0u);
}

TEST_F(AfterTest, CancelledDependencyCancelsAndCancelledWaiterIsForgotten) {
  const std::string a = Submit(Spec(1));
  const std::string b = Submit(Spec(1, {a}));
  const std::string c = Submit(Spec(1, {a}));
  ASSERT_TRUE(Kill(c).ok());  // a waiting job cancelled by its user
  EXPECT_EQ(Get(c).root_cause->reason, CauseReason::kCancelled);
  ASSERT_TRUE(Kill(a).ok());
  launcher_.ExitSignalled(a);
  clock_.Advance(Millis(0));
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get(a).state, JobState::kCancelled);
  EXPECT_EQ(Get(b).root_cause->reason, CauseReason::kDependencyFailed);
  EXPECT_EQ(Get(c).root_cause->reason, CauseReason::kCancelled);
}

TEST_F(AfterTest, RefusesUnknownAndEndedUnsuccessfulJobsWithOneLine) {
  auto unknown = manager_->Submit(Spec(1, {"99"}), "alice");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "--after 99: no job '99'; `ltctl ps -a` lists them");
  const std::string a = Submit(Spec(1));
  FailRank0(a);
  auto late = manager_->Submit(Spec(1, {a}), "alice");
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.status().message().find("already ended FAILED, so this job would never run"),
            std::string::npos)
      << late.status().message();
  // An id refused takes no id: the next job is the next number.
  const std::string ok = Submit(Spec(1));
  EXPECT_EQ(ok, std::to_string(std::stoi(a) + 1));
}

TEST_F(AfterTest, SucceededDependencyIsAlreadyMetAndAnotherUsersJobMayBeNamed) {
  const std::string bobs = Submit(Spec(1, {}, 4242), "bob");
  Succeed(bobs);
  const std::string mine = Submit(Spec(1, {bobs}));
  EXPECT_EQ(Get(mine).state, JobState::kRunning);
}

TEST_F(AfterTest, WaitingJobsCountTowardThePendingLimit) {
  Reset(1, 0, /*user_max_pending=*/2);
  const std::string a = Submit(Spec(1));
  Submit(Spec(1, {a}));
  Submit(Spec(1, {a}));
  auto third = manager_->Submit(Spec(1, {a}), "alice");
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.status().message().find("already has 2 pending jobs"), std::string::npos)
      << third.status().message();
}

TEST_F(AfterTest, PendingReasonsSayWhyInWords) {
  const std::string big = Submit(Spec(3));
  const std::string wants = Submit(Spec(2));
  EXPECT_EQ(manager_->PendingReason(Get(wants)), "needs 2 devices, 1 free");
  const std::string behind = Submit(Spec(1));
  EXPECT_EQ(manager_->PendingReason(Get(behind)), "behind job " + wants + " of the same user");
  Succeed(big);
  EXPECT_EQ(Get(wants).state, JobState::kRunning);
  EXPECT_EQ(Get(behind).state, JobState::kRunning);
}

TEST_F(AfterTest, PendingReasonNamesTheUserLimit) {
  Reset(4, /*user_max_running=*/1);
  const std::string one = Submit(Spec(1));
  const std::string two = Submit(Spec(1));
  EXPECT_EQ(Get(one).state, JobState::kRunning);
  EXPECT_EQ(manager_->PendingReason(Get(two)), "user limit: 1 running");
}

TEST_F(AfterTest, ARestartedLtdCancelsWhatCanNoLongerRun) {
  const std::string a = Submit(Spec(1));
  const std::string waits = Submit(Spec(1, {a}));
  // The next ltd has no supervisor to adopt `a`: it is LOST, and the job
  // waiting for it, read back from its record, can never run.
  Reset(4);
  manager_->Recover();
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get(a).state, JobState::kLost);
  EXPECT_EQ(Get(waits).state, JobState::kCancelled);
  ASSERT_TRUE(Get(waits).root_cause);
  EXPECT_EQ(Get(waits).root_cause->reason, CauseReason::kDependencyFailed);
  EXPECT_EQ(Get(waits).root_cause->message, "job " + a + ", which it was to run after, ended LOST");
  EXPECT_EQ(clock_.pending_timers(), 0u);
}

TEST_F(AfterTest, ARestartedLtdWaitsAgainForAPendingDependency) {
  Reset(1);
  const std::string a = Submit(Spec(1));
  const std::string b = Submit(Spec(1));  // pending: one slot
  const std::string c = Submit(Spec(1, {b}));
  EXPECT_EQ(manager_->PendingReason(Get(c)), "after job " + b);
  Reset(1);
  manager_->Recover();
  EXPECT_EQ(Get(a).state, JobState::kLost);  // no supervisor to adopt it
  EXPECT_EQ(Get(b).state, JobState::kRunning);
  EXPECT_EQ(Get(c).state, JobState::kPending);
  EXPECT_EQ(manager_->PendingReason(Get(c)), "after job " + b);
  Succeed(b);
  EXPECT_EQ(Get(c).state, JobState::kRunning);
}

// --dependency's kinds: afterany is met by any end, afternotok only by
// one without success.
TEST(Dependencies, EachKindIsMetByItsEnds) {
  Dependencies d;
  d.AddKinds("9", 1,
             std::map<std::string, DependencyKind>{{"5", DependencyKind::kAfterAny},
                                                   {"6", DependencyKind::kAfterNotOk}});
  EXPECT_TRUE(d.Ended("5", JobState::kTimeout).ready.empty());
  EXPECT_EQ(d.Unmet("9"), std::vector<std::string>{"6"});
  EXPECT_EQ(d.Ended("6", JobState::kOutOfMemory).ready, std::vector<std::string>{"9"});

  d.AddKinds("10", 1, std::map<std::string, DependencyKind>{{"7", DependencyKind::kAfterNotOk}});
  EXPECT_EQ(d.Ended("7", JobState::kSucceeded).failed, std::vector<std::string>{"10"});
  EXPECT_FALSE(d.Waiting("10"));
}

TEST(DependencyText, ParsesSbatchsForms) {
  auto d = ParseDependency("afterok:3:prep,afterany:4,afternotok:5,singleton");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->refs, (std::vector<DependencyRef>{{DependencyKind::kAfterOk, "3"},
                                                 {DependencyKind::kAfterOk, "prep"},
                                                 {DependencyKind::kAfterAny, "4"},
                                                 {DependencyKind::kAfterNotOk, "5"}}));
  EXPECT_TRUE(d->singleton);
  EXPECT_EQ(OutcomeOf(DependencyKind::kAfterAny, std::nullopt), DependencyOutcome::kMet);
  EXPECT_EQ(OutcomeOf(DependencyKind::kAfterOk, std::nullopt), DependencyOutcome::kNever);
  EXPECT_EQ(OutcomeOf(DependencyKind::kAfterNotOk, JobState::kRunning),
            DependencyOutcome::kWaiting);
}

TEST(DependencyText, RefusesWhatItCannotDoInOneLine) {
  struct Case {
    std::string text, says;
  };
  for (const Case& c :
       {Case{"", "is empty"}, Case{"afterok", "names no job"}, Case{"afterok:", "names no job"},
        Case{"afterok:3::4", "an empty job"},
        Case{"after:3", "a Slurm dependency ltd does not have"},
        Case{"aftercorr:3", "a Slurm dependency ltd does not have"}, Case{"afterok:3+10", "+TIME"},
        Case{"afterok:3,", "no dependency"}, Case{"bogus\xff:1", "'bogus\\xff' is no dependency"},
        Case{std::string("afterok:1\0", 10), "NUL"},
        Case{std::string(5000, 'a'), "over 4096 bytes"}}) {
    auto d = ParseDependency(c.text);
    ASSERT_FALSE(d.ok()) << c.text;
    const std::string m(d.status().message());
    EXPECT_TRUE(m.rfind("--dependency", 0) == 0 && m.find('\n') == std::string::npos) << m;
    EXPECT_NE(m.find(c.says), std::string::npos) << c.text << ": " << m;
  }
}

}  // namespace
}  // namespace ltd::test
