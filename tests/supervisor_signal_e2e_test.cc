// A stop signal sent to a supervisor (an administrator's kill, a
// service manager's stop): with a job, the job is torn down, every rank
// gone, and the record says why; between jobs, a spare simply ends.
// The signals are taken on the supervisor's loop through a signalfd
// while it has a job (loop/signal_watch.h), and left at their default
// action otherwise.
#include <signal.h>

#include <cstdlib>

#include "e2e_fixture.h"

namespace ltd::test {
namespace {

const std::string kChild = TestChildPath();

class SupervisorSignalE2E : public E2E {};

// The pid of job `id`'s supervisor, as ltd's log says ("job=ID
// supervisor pid PID"); 0 when the log does not say.
pid_t SupervisorPidFromLog(const std::string& log, const std::string& id) {
  const std::string key = "job=" + id + " supervisor pid ";
  const size_t at = log.find(key);
  if (at == std::string::npos) return 0;
  return static_cast<pid_t>(std::strtol(log.c_str() + at + key.size(), nullptr, 10));
}

TEST_F(SupervisorSignalE2E, AStopSignalTearsTheJobDownAndSaysWhy) {
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    SCOPED_TRACE(sigabbrev_np(sig));
    const std::string id = SubmitDetached({"--devices", "2", "--", kChild, "hang"});
    ASSERT_TRUE(WaitFor([&] { return d_.Show(id).value("state", "") == "RUNNING"; }, 20s))
        << d_.Show(id).dump(2);
    ASSERT_TRUE(WaitFor([&] { return ProcessesWithMarker(d_.marker()).size() == 2; }, 20s));
    const std::vector<pid_t> shims = Supervisors(d_.state_dir(), id);
    ASSERT_EQ(shims.size(), 1u);
    ASSERT_EQ(kill(shims[0], sig), 0);
    const nlohmann::json job = d_.WaitEnded(id);
    EXPECT_EQ(job.value("state", ""), "CANCELLED") << job.dump(2);
    EXPECT_EQ(job["root_cause"].value("message", ""),
              std::string("its supervisor was stopped (SIG") + sigabbrev_np(sig) + ")")
        << job.dump(2);
    EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(d_.marker()).empty(); }, 10s));
  }
}

TEST_F(SupervisorSignalE2E, ASpareWithoutAJobEndsAtASignal) {
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    SCOPED_TRACE(sigabbrev_np(sig));
    // A job's supervisor, free again after it: a spare that served a job.
    // ltd may have started another spare while the job ran, so the one
    // to signal is named by ltd's log, not found as the only spare.
    const std::string id = SubmitDetached({"--devices", "1", "--", kChild, "exit:0"});
    EXPECT_EQ(d_.WaitEnded(id).value("state", ""), "SUCCEEDED");
    const pid_t spare = SupervisorPidFromLog(d_.log(), id);
    ASSERT_GT(spare, 0) << d_.log();
    ASSERT_TRUE(WaitFor([&] { return IsReadySpare(d_.state_dir(), spare); }, 20s)) << d_.log();
    ASSERT_EQ(kill(spare, sig), 0);
    EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(spare); }, 10s));
    // Reaped by ltd's pool of spares, which says how it ended.
    const std::string said = std::string("spare supervisor pid ") + std::to_string(spare) +
                             " died of signal " + std::to_string(sig);
    EXPECT_TRUE(WaitFor([&] { return d_.log().find(said) != std::string::npos; }, 10s)) << d_.log();
    EXPECT_TRUE(WaitFor([&] { return ZombieChildrenOf(d_.pid()).empty(); }, 10s));
  }
}

// A spare that served a job and is given another: killed with that job,
// it is reaped by the job's watcher, which says how it ended, not by the
// pool of spares that still knows it.
TEST_F(SupervisorSignalE2E, ASpareKilledWithItsNextJobIsReapedByThatJobsWatcher) {
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    const std::string first = SubmitDetached({"--devices", "1", "--", kChild, "exit:0"});
    EXPECT_EQ(d_.WaitEnded(first).value("state", ""), "SUCCEEDED");
    const pid_t served = SupervisorPidFromLog(d_.log(), first);
    ASSERT_GT(served, 0) << d_.log();
    ASSERT_TRUE(WaitFor([&] { return IsReadySpare(d_.state_dir(), served); }, 20s)) << d_.log();
    // Only that spare waits: the next job is its.
    for (pid_t other : SpareSupervisors(d_.state_dir())) {
      if (other != served) {
        ASSERT_EQ(kill(other, SIGKILL), 0);
      }
    }
    ASSERT_TRUE(WaitFor(
        [&] { return SpareSupervisors(d_.state_dir()) == std::vector<pid_t>{served}; }, 10s));
    const std::string id = SubmitDetached({"--devices", "1", "--", kChild, "hang"});
    ASSERT_TRUE(WaitFor([&] { return d_.Show(id).value("state", "") == "RUNNING"; }, 20s))
        << d_.Show(id).dump(2);
    const std::vector<pid_t> shims = Supervisors(d_.state_dir(), id);
    ASSERT_EQ(shims, std::vector<pid_t>{served}) << d_.log();
    ASSERT_EQ(kill(served, SIGKILL), 0);
    const nlohmann::json job = d_.WaitEnded(id);
    EXPECT_EQ(job.value("state", ""), "LOST") << job.dump(2);
    EXPECT_NE(job["root_cause"].value("message", "").find("died of signal 9 (SIGKILL)"),
              std::string::npos)
        << job.dump(2);
    EXPECT_TRUE(WaitFor([&] { return ZombieChildrenOf(d_.pid()).empty(); }, 10s));
    EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(d_.marker()).empty(); }, 10s));
  }
}

// Jobs outlive ltd here, as under systemd.
class SlowSupervisorE2E : public E2E {
 protected:
  std::vector<std::string> DaemonArgs() override { return {"--restore-window", "10m"}; }
};

// A supervisor slow to answer the next ltd's call (stopped here, as a
// loaded machine can hold it for seconds) keeps its job: ltd says it
// waits for it, and adopts it once it answers, rather than taking it for
// dead after a second and killing its ranks.
TEST_F(SlowSupervisorE2E, ASupervisorSlowToAnswerAtARestartKeepsItsJob) {
  const std::string id = SubmitDetached({"--devices", "2", "--", kChild, "hang"});
  ASSERT_TRUE(WaitFor([&] { return d_.Show(id).value("state", "") == "RUNNING"; }, 20s))
      << d_.Show(id).dump(2);
  ASSERT_TRUE(WaitFor([&] { return ProcessesWithMarker(d_.marker()).size() == 2; }, 20s));
  const std::vector<pid_t> ranks = ProcessesWithMarker(d_.marker());
  const std::vector<pid_t> shims = Supervisors(d_.state_dir(), id);
  ASSERT_EQ(shims.size(), 1u);
  ASSERT_EQ(kill(shims[0], SIGSTOP), 0);
  d_.KillHard();
  ASSERT_TRUE(d_.Start(DaemonArgs())) << d_.log();
  const std::string waits = "job=" + id + " its supervisor took its call and has not answered";
  const bool said = WaitFor([&] { return d_.log().find(waits) != std::string::npos; }, 20s);
  kill(shims[0], SIGCONT);
  ASSERT_TRUE(said) << d_.log();
  const nlohmann::json job = d_.Show(id);
  EXPECT_EQ(job.value("state", ""), "RUNNING") << job.dump(2) << d_.log();
  for (pid_t rank : ranks) EXPECT_TRUE(ProcessAlive(rank)) << rank << " was killed";
  EXPECT_NE(d_.log().find("job=" + id + " adopted its supervisor"), std::string::npos) << d_.log();
  ASSERT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  EXPECT_EQ(d_.WaitEnded(id).value("state", ""), "CANCELLED");
  EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(d_.marker()).empty(); }, 10s));
}

}  // namespace
}  // namespace ltd::test
