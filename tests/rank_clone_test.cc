// A rank's start in a child that shares the supervisor's memory
// (process/rank_clone.h), through the real launcher: as a user, with the
// supervisor's signals and fds kept from the rank; the supervisor's memory
// closed to the user meanwhile; and a start that waits (for its groups, or
// stuck in the kernel: a frozen cgroup stands in for a file system that
// never answers) holding neither the launcher's thread nor any fd of the
// supervisor.
#include "rank_clone.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "freezer.h"
#include "harness.h"
#include "launcher_fixture.h"
#include "loop.h"
#include "process_group_containment.h"
#include "process_scan.h"
#include "run_loop.h"
#include "str_util.h"
#include "uv_launcher.h"

namespace ltd::test {
namespace {

// Process groups, with every rank put in `cgroups` as it starts.
class JoiningContainment final : public Containment {
 public:
  JoiningContainment(uv_loop_t* loop, std::vector<std::string> cgroups)
      : groups_(loop), cgroups_(std::move(cgroups)) {}
  std::string_view name() const override { return "test"; }
  absl::Status BeginJob(const std::string& id, const JobLimits& l) override {
    return groups_.BeginJob(id, l);
  }
  std::vector<std::string> RankCgroups(const std::string&, int) override { return cgroups_; }
  void KillJob(const std::string& id, const std::vector<pid_t>& pids) override {
    groups_.KillJob(id, pids);
  }
  void EndJob(const std::string& id, std::function<void()> on_empty) override {
    groups_.EndJob(id, std::move(on_empty));
  }

 private:
  ProcessGroupContainment groups_;
  std::vector<std::string> cgroups_;
};

class RankCloneTest : public LauncherFixture {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "ranks change users only as root";
    if (!kRankChildSupported) GTEST_SKIP() << "ranks start through lt-exec on this architecture";
  }

  void Start(std::vector<std::string> cgroups = {}, GroupsLookup::Lookup lookup = LoginGroups) {
    launcher_ = std::make_unique<UvLauncher>(
        loop_->get(), std::make_unique<JoiningContainment>(loop_->get(), std::move(cgroups)),
        LT_EXEC_SHIM, *ControlReader::Create(loop_->get()), std::move(lookup));
  }

  pid_t Spawn(Rank& rank, const std::string& verbs, uid_t uid, gid_t gid) {
    SpawnRequest req = Request({verbs});
    req.uid = uid;
    req.gid = gid;
    return LauncherFixture::Spawn(rank, req);
  }
};

// A user may not ptrace the supervisor, nor so a rank's start that shares
// its memory as that user until its execve.
TEST_F(RankCloneTest, TheSupervisorsMemoryIsNotDumpable) {
  ASSERT_EQ(prctl(PR_SET_DUMPABLE, 1), 0);
  Start();
  EXPECT_EQ(prctl(PR_GET_DUMPABLE), 0);
}

// Whom it becomes, what it keeps: the user with the groups it was given,
// fds 0-3 and 5 only, no signal blocked or ignored, though this thread
// blocks two, ignores two and catches one (whose handler must not run in
// the start: it is reset before anything is unblocked).
TEST_F(RankCloneTest, ARankIsItsUserWithOnlyItsFdsAndNoSignalOfTheSupervisors) {
  TestUser user("ltc" + std::to_string(getpid()));
  ASSERT_TRUE(user.ok()) << user.error();
  struct sigaction ign {
  }, caught{}, old[3]{};
  ign.sa_handler = SIG_IGN;
  caught.sa_handler = [](int) {};
  ASSERT_EQ(sigaction(SIGUSR1, &ign, &old[0]), 0);
  ASSERT_EQ(sigaction(SIGRTMIN + 3, &ign, &old[1]), 0);
  ASSERT_EQ(sigaction(SIGTERM, &caught, &old[2]), 0);
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR2);
  sigaddset(&block, SIGHUP);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &block, &old_mask), 0);
  const int leaky = open("/dev/null", O_RDONLY);  // no O_CLOEXEC, on purpose

  Start();
  launcher_->ExpectUser(user.uid(), user.gid(), std::vector<gid_t>{user.gid(), 4242});
  Rank r;
  Spawn(r, "ids,fds,signals,exit:0", user.uid(), user.gid());
  const bool ended = RunUntil([&] { return r.exit.has_value(); });

  close(leaky);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  sigaction(SIGUSR1, &old[0], nullptr);
  sigaction(SIGRTMIN + 3, &old[1], nullptr);
  sigaction(SIGTERM, &old[2], nullptr);
  ASSERT_TRUE(ended);
  EXPECT_EQ(r.exit->exit_code, 0) << r.control;
  EXPECT_EQ(r.out,
            Cat("uid=", user.uid(), " gid=", user.gid(), " groups=", user.gid(), ",", 4242, "\n",
                "fds=0,1,2,3,5\n", "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"));
}

// The fds open in `pid`, sorted.
std::vector<int> FdsOf(pid_t pid) {
  std::vector<int> fds;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(Cat("/proc/", pid, "/fd"), ec))
    fds.push_back(std::stoi(e.path().filename()));
  std::sort(fds.begin(), fds.end());
  return fds;
}

// Groups that come later (NSS slow to answer): the start waits for them
// on fd 6 holding nothing of ours but the rank's fds, and the rank runs
// with them once they come.
TEST_F(RankCloneTest, AStartWaitsForGroupsThatComeLaterHoldingOnlyTheRanksFds) {
  TestUser user("ltg" + std::to_string(getpid()));
  ASSERT_TRUE(user.ok()) << user.error();
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
  };
  auto gate = std::make_shared<Gate>();  // the lookup's thread may outlive the test
  Start({}, [gate](uid_t, gid_t gid) -> std::optional<std::vector<gid_t>> {
    std::unique_lock<std::mutex> lock(gate->mu);
    gate->cv.wait_for(lock, 30s, [&] { return gate->open; });
    return std::vector<gid_t>{gid, 4343};
  });
  launcher_->ExpectUser(user.uid(), user.gid(), std::nullopt);  // the lookup starts
  const int leaky = open("/dev/null", O_RDONLY);                // no O_CLOEXEC, on purpose
  Rank r;
  const pid_t pid = Spawn(r, "ids,exit:0", user.uid(), user.gid());
  close(leaky);
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(WaitFor([&] { return FdsOf(pid) == std::vector<int>{0, 1, 2, 3, 5, 6}; }, 10s))
      << "fds: " << ::testing::PrintToString(FdsOf(pid));
  EXPECT_FALSE(RunUntil([&] { return r.exit.has_value(); }, 200ms)) << "it ran without its groups";
  {
    const std::lock_guard<std::mutex> lock(gate->mu);
    gate->open = true;
  }
  gate->cv.notify_all();
  ASSERT_TRUE(RunUntil([&] { return r.exit.has_value(); }));
  EXPECT_EQ(r.exit->exit_code, 0) << r.control;
  EXPECT_EQ(r.out, Cat("uid=", user.uid(), " gid=", user.gid(), " groups=", user.gid(), ",4343\n"));
}

// Its start waits in the kernel (joining a frozen cgroup, as it would
// entering a working directory on a server that never answers): the
// launcher has returned and its loop runs, the start holds none of the
// supervisor's fds while it waits, and a kill ends it once it can run.
TEST_F(RankCloneTest, AStartStuckInTheKernelHoldsNeitherTheLauncherNorAnyFdOfOurs) {
  Freezer freezer;
  if (!freezer.ok()) GTEST_SKIP() << "no cgroup v1 freezer here";
  ASSERT_TRUE(freezer.FreezeEmpty());
  Start({freezer.dir()});
  const int leaky = open("/dev/null", O_RDONLY);  // no O_CLOEXEC, on purpose
  Rank r;
  const pid_t pid = Spawn(r, "exit:0", geteuid(), getegid());
  close(leaky);
  ASSERT_GT(pid, 0);
  // Frozen: the kernel shows it in D state.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto entry = ReadProcEntry(pid);
        return entry && entry->state == 'D';
      },
      10s));
  // Its own, and the cgroup.procs it froze writing to.
  std::vector<int> fds;
  for (int fd : FdsOf(pid)) {
    if (fd > 5 || fd == 4) {
      EXPECT_EQ(std::filesystem::read_symlink(Cat("/proc/", pid, "/fd/", fd)).string(),
                freezer.dir() + "/cgroup.procs")
          << "fd " << fd;
      continue;
    }
    fds.push_back(fd);
  }
  EXPECT_EQ(fds, (std::vector<int>{0, 1, 2, 3, 5}));
  EXPECT_FALSE(RunUntil([&] { return r.exit.has_value(); }, 200ms)) << "it ran while frozen";
  launcher_->SignalRank("t", 0, SIGKILL);
  freezer.Thaw();
  ASSERT_TRUE(RunUntil([&] { return r.exit.has_value(); }));
  EXPECT_EQ(r.exit->term_signal, SIGKILL);
}

}  // namespace
}  // namespace ltd::test
