// A supervisor that ltd started and never watched (it was SIGKILLed or
// stopped between the spawn and the watch) goes with that ltd, having
// changed nothing: its job is PENDING still, and the next ltd starts it
// with a supervisor of its own. Before, it waited out its restore window
// (10 minutes by default) and then wrote the job LOST over what the other
// supervisor recorded. The real lt-shim, started as ltd starts it
// (SpawnShim), with the test as its ltd. And the next ltd's start, which
// waits for a supervisor its predecessor was starting as it died.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <optional>
#include <thread>

#include "file_io.h"
#include "harness.h"
#include "job_store.h"
#include "pidfd.h"
#include "shim_probe.h"
#include "shim_spawner.h"
#include "spare_wire.h"
#include "str_util.h"

namespace ltd::test {
namespace {

const char kJobId[] = "7";

class SupervisorFirstContact : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lt-first-contact-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto store = JobStore::Open(dir_ + "/state");
    ASSERT_TRUE(store.ok()) << store.status();
    store_.emplace(std::move(*store));
    ASSERT_TRUE(store_->CreateJobDir(kJobId).ok());
    Job job;
    job.id = kJobId;
    job.user = "root";
    job.spec.devices = 1;
    job.spec.argv = {TestChildPath(), "exit:0"};
    ASSERT_TRUE(store_->Save(job).ok());
    const std::string build = std::filesystem::path(LtdPath()).parent_path();
    config_.shim_binary = build + "/lt-shim";
    config_.exec_binary = build + "/lt-exec";
    config_.containment = "process-group";
    config_.log_level = "debug";
  }
  void TearDown() override {
    for (SpawnedShim& shim : shims_) {
      if (!shim.pidfd.valid()) continue;
      PidfdSendSignal(shim.pidfd.get(), SIGKILL);
      waitpid(shim.pid, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }

  // How the supervisor `shim` ended, once it has within `timeout`.
  std::optional<int> ExitCode(SpawnedShim& shim, std::chrono::milliseconds timeout) {
    int status = 0;
    if (!WaitFor([&] { return waitpid(shim.pid, &status, WNOHANG) == shim.pid; }, timeout)) {
      return std::nullopt;
    }
    shim.pidfd.reset();
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  // The pid of the supervisor that answers on the job's socket; 0: none.
  pid_t Answering() {
    const std::string state = std::filesystem::canonical(store_->state_dir());
    auto found = ProbeShims(*store_, state, {kJobId}, 2s);
    return found.count(kJobId) != 0 ? found[kJobId].pid : 0;
  }
  void ExpectJobUntouched() {
    auto job = store_->Load(kJobId);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->state, JobState::kPending);
    EXPECT_FALSE(std::filesystem::exists(store_->JobDir(kJobId) + "/supervisor.sock"));
  }

  std::string dir_;
  std::optional<JobStore> store_;
  ShimConfig config_;              // restore window: the default 10 minutes
  std::deque<SpawnedShim> shims_;  // references to them stay valid
};

TEST_F(SupervisorFirstContact, ASupervisorWhoseLtdGoesBeforeWatchingItGoesToo) {
  auto shim = SpawnShim(config_, store_->state_dir(), kJobId, nullptr);
  ASSERT_TRUE(shim.ok()) << shim.status();
  SpawnedShim& s = shims_.emplace_back(std::move(*shim));
  // Up and serving its job, unwatched.
  ASSERT_TRUE(WaitFor(
      [&] { return std::filesystem::exists(store_->JobDir(kJobId) + "/supervisor.sock"); }, 20s));
  s.channel.reset();  // ltd is gone
  EXPECT_EQ(ExitCode(s, 10s), std::optional<int>(0)) << "it waits for a watch that never comes";
  ExpectJobUntouched();
}

// What ltd found at its start, a supervisor it started takes as found: the
// state dir (made and proved writable: nothing made in it again) and the
// cgroup where a device program attaches (passed down, not probed again).
TEST_F(SupervisorFirstContact, ASupervisorTakesWhatItsLtdFoundAtItsStart) {
  std::filesystem::remove(store_->state_dir() + "/removed");
  config_.device_program_proven = "/sys/fs/cgroup/ltd-test-proven";
  auto shim = SpawnShim(config_, store_->state_dir(), kJobId, nullptr);
  ASSERT_TRUE(shim.ok()) << shim.status();
  SpawnedShim& s = shims_.emplace_back(std::move(*shim));
  ASSERT_TRUE(WaitFor(
      [&] { return std::filesystem::exists(store_->JobDir(kJobId) + "/supervisor.sock"); }, 20s));
  auto cmdline = ReadWholeFile(Cat("/proc/", s.pid, "/cmdline"));
  ASSERT_TRUE(cmdline.ok()) << cmdline.status();
  EXPECT_NE(cmdline->find(std::string("--device-program-proven") + '\0' +
                          "/sys/fs/cgroup/ltd-test-proven" + '\0'),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(store_->state_dir() + "/removed"));
  s.channel.reset();
  EXPECT_EQ(ExitCode(s, 10s), std::optional<int>(0));
}

// A spare: ltd wrote it the job's id, and went before it watched it.
TEST_F(SupervisorFirstContact, ASpareGivenAJobAsItsLtdGoesGoesToo) {
  Fd assign;
  auto shim = SpawnShim(config_, store_->state_dir(), "", &assign);
  ASSERT_TRUE(shim.ok()) << shim.status();
  SpawnedShim& s = shims_.emplace_back(std::move(*shim));
  auto connection = ShimConnection();
  ASSERT_TRUE(connection.ok()) << connection.status();
  ASSERT_TRUE(SendJob(assign.get(), kJobId, connection->second.get()).ok());
  assign.reset();
  connection->second.reset();
  connection->first.reset();
  EXPECT_EQ(ExitCode(s, 10s), std::optional<int>(0)) << "it waits for a watch that never comes";
  ExpectJobUntouched();
}

// lt-shim has no etcd client: given a multi-node run (ltd starts
// lt-shim-etcd for those) it goes at once, having changed nothing.
TEST_F(SupervisorFirstContact, LtShimLeavesAMultiNodeRunToLtShimEtcd) {
  auto job = store_->Load(kJobId);
  ASSERT_TRUE(job.ok()) << job.status();
  job->spec.nodes.nnodes = 2;
  job->spec.nodes.rdzv = "etcd://127.0.0.1:1";
  ASSERT_TRUE(store_->Save(*job).ok());
  auto shim = SpawnShim(config_, store_->state_dir(), kJobId, nullptr);
  ASSERT_TRUE(shim.ok()) << shim.status();
  SpawnedShim& s = shims_.emplace_back(std::move(*shim));
  EXPECT_EQ(ExitCode(s, 10s), std::optional<int>(1));
  ExpectJobUntouched();
}

// The next ltd's supervisor of the job waits for the earlier one, whose
// ltd is still there in this test, rather than take its socket; it goes
// on once the earlier is gone.
TEST_F(SupervisorFirstContact, TheNextSupervisorOfAJobWaitsForTheEarlierToGo) {
  auto first = SpawnShim(config_, store_->state_dir(), kJobId, nullptr);
  ASSERT_TRUE(first.ok()) << first.status();
  SpawnedShim& a = shims_.emplace_back(std::move(*first));
  ASSERT_TRUE(WaitFor([&] { return Answering() == a.pid; }, 20s));
  auto second = SpawnShim(config_, store_->state_dir(), kJobId, nullptr);
  ASSERT_TRUE(second.ok()) << second.status();
  SpawnedShim& b = shims_.emplace_back(std::move(*second));
  // b waits at the job's lock; the job's socket stays a's.
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(Answering(), a.pid) << "the second supervisor took the first's socket";
  EXPECT_TRUE(ProcessAlive(b.pid));
  a.channel.reset();
  EXPECT_EQ(ExitCode(a, 10s), std::optional<int>(0));
  // b has the job now.
  EXPECT_TRUE(WaitFor([&] { return Answering() == b.pid; }, 20s));
  b.channel.reset();
  EXPECT_EQ(ExitCode(b, 10s), std::optional<int>(0));
  ExpectJobUntouched();
}

// ltd's start, after its predecessor died: a PENDING job whose supervisor
// (the job's lock held) is starting it is waited for, then counted among
// the RUNNING ones, whose supervisors are kept and adopted; a job whose
// supervisor goes instead, or that has none, stays PENDING.
TEST_F(SupervisorFirstContact, LtdWaitsForASupervisorThatIsStartingItsJob) {
  Fd held(open(store_->SupervisorLock(kJobId).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(held.valid());
  ASSERT_EQ(flock(held.get(), LOCK_EX), 0);
  std::thread starting([&] {
    std::this_thread::sleep_for(200ms);
    auto job = store_->Load(kJobId);
    ASSERT_TRUE(job.ok());
    job->state = JobState::kRunning;
    ASSERT_TRUE(store_->Save(*job).ok());
  });
  EXPECT_EQ(AwaitStartingShims(*store_, {kJobId}, 10s), std::vector<std::string>{kJobId});
  starting.join();
}

TEST_F(SupervisorFirstContact, LtdWaitsForASupervisorThatGoesAndQueuesItsJobAgain) {
  Fd held(open(store_->SupervisorLock(kJobId).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(held.valid());
  ASSERT_EQ(flock(held.get(), LOCK_EX), 0);
  std::thread going([&] {
    std::this_thread::sleep_for(200ms);
    held.reset();
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(AwaitStartingShims(*store_, {kJobId}, 10s).empty());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms) << "it did not wait";
  going.join();
  // No supervisor was ever started for job 8: nothing to wait for.
  EXPECT_TRUE(AwaitStartingShims(*store_, {"8"}, 10s).empty());
}

}  // namespace
}  // namespace ltd::test
