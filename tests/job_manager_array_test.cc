// The job table's arrays (daemon/jobs/job_arrays.cc, job_submit.cc): an
// array submit makes a job per task, the throttle holds the rest, JOB
// names a task or the whole array, and a kill of the array ends each task.
#include <gtest/gtest.h>

#include "manager_fixture.h"

namespace ltd::test {
namespace {

class JobManagerArrayTest : public ManagerFixture {
 protected:
  JobManagerArrayTest() : ManagerFixture("jma") {
    ManagerConfig config;
    config.placement.slots = 8;
    config.placement.user_max_pending_jobs = 6;
    RunnerConfig runner;
    runner.restart_backoff = Millis(0);
    Make(config, runner);
  }

  JobSpec ArraySpec(std::vector<uint32_t> tasks, uint32_t throttle) {
    JobSpec s;
    s.devices = 1;
    s.argv = {"/bin/true"};
    s.cwd = "/";
    s.uid = getuid();
    s.gid = getgid();
    s.name = "sweep";
    s.submit_token = "tok";
    s.array_tasks = std::move(tasks);
    s.array.throttle = throttle;
    return s;
  }

  const Job& Task(const std::string& array, uint32_t task) {
    return *manager_->ResolveAny(array + "_" + std::to_string(task))->job;
  }
};

TEST_F(JobManagerArrayTest, TasksAreJobsOfTheirOwnThrottledAndNamedByTheArray) {
  const std::string a = Submit(ArraySpec({0, 1, 5, 7}, 2));
  const std::vector<const Job*> tasks = manager_->ArrayTasks(a);
  ASSERT_EQ(tasks.size(), 4u);
  EXPECT_EQ(tasks[0]->id, a);  // the array's id is its first task's
  std::vector<uint32_t> ids;
  for (const Job* t : tasks) {
    ids.push_back(t->spec.array.task);
    EXPECT_EQ(t->spec.array.job_id, a);
    EXPECT_EQ(t->spec.array.count, 4u);
    EXPECT_EQ(t->spec.array.throttle, 2u);
    // Only the first keeps the token: a repeat of the submit finds the array.
    EXPECT_EQ(t->spec.submit_token, t == tasks[0] ? "tok" : "");
  }
  EXPECT_EQ(ids, (std::vector<uint32_t>{0, 1, 5, 7}));
  EXPECT_EQ(Task(a, 0).state, JobState::kRunning);
  EXPECT_EQ(Task(a, 1).state, JobState::kRunning);
  EXPECT_EQ(Task(a, 5).state, JobState::kPending);
  EXPECT_EQ(manager_->PendingReason(Task(a, 5)), "array throttle: 2 of 4 tasks running");
  EXPECT_EQ(launcher_.Env(Task(a, 1).id, 0, "LTD_ARRAY_TASK_ID"), "1");
  EXPECT_EQ(launcher_.Env(Task(a, 1).id, 0, "LTD_ARRAY_JOB_ID"), a);
  EXPECT_EQ(*manager_->Submit(ArraySpec({0, 1, 5, 7}, 2), "alice"), a);  // same token

  // JOB: the array's id and its name are the whole array; one job's verbs refuse it.
  EXPECT_EQ(manager_->ResolveAny(a)->tasks.size(), 4u);
  EXPECT_EQ(manager_->ResolveAny("sweep")->tasks.size(), 4u);
  EXPECT_EQ(manager_->ResolveAny(Task(a, 5).id)->job, &Task(a, 5));  // another task's own id
  auto refused = manager_->Resolve(a);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "job " + a +
                                            " is an array of 4 tasks; name one task, such as " + a +
                                            "_0 (kill, wait and show take the whole array)");
  EXPECT_NE(manager_->ResolveAny(a + "_3").status().message().find("has no task 3"),
            std::string::npos);

  // A task ends: the next starts in its place.
  launcher_.Exit(Task(a, 0).id, 0, 0);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Task(a, 0).state, JobState::kSucceeded);
  EXPECT_EQ(Task(a, 5).state, JobState::kRunning);
  EXPECT_EQ(Task(a, 7).state, JobState::kPending);

  // The whole array killed: the pending task is cancelled, never started.
  std::vector<std::string> all;
  for (const Job* t : manager_->ArrayTasks(a)) {
    if (!IsFinal(t->state)) all.push_back(t->id);
  }
  const size_t started = launcher_.procs.size();
  int answers = 0;
  manager_->KillEach(all, KillOrder::Teardown("alice"), [&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    ++answers;
  });
  EXPECT_EQ(answers, 3);
  EXPECT_EQ(Task(a, 7).state, JobState::kCancelled);
  for (uint32_t t : {1u, 5u}) launcher_.ExitSignalled(Task(a, t).id);
  clock_.Advance(Millis(0));
  for (uint32_t t : {1u, 5u, 7u}) EXPECT_EQ(Task(a, t).state, JobState::kCancelled) << t;
  EXPECT_EQ(launcher_.procs.size(), started);
}

TEST_F(JobManagerArrayTest, AnArrayCountsAsItsTasksForThePendingLimit) {
  // 6 pending at most: an array of 7 is refused whole, as 7 submits
  // past the limit would be; nothing of it is made.
  auto refused =
      manager_->Submit(ArraySpec({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, 1), "alice");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("the array would add 15"), std::string::npos)
      << refused.status();
  EXPECT_TRUE(manager_->List(true).empty());
}

}  // namespace
}  // namespace ltd::test
