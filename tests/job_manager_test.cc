// The job state machine through the job manager, with a fake launcher and
// a fake clock: every transition, the root-cause choice, exit codes,
// watchdogs, restarts, recovery. No process is started, nothing sleeps.
#include "job_manager.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "absl/strings/match.h"
#include "fakes.h"
#include "hang_report.h"
#include "local_host.h"
#include "manager_fixture.h"

namespace ltd::test {
namespace {

class Recorder final : public JobObserver {
 public:
  bool WantsOutput() const override { return wants_output; }
  void OnOutputResumed() override { ++resumed; }
  void OnOutput(int rank, Stream s, std::string_view line) override {
    lines.push_back(std::to_string(rank) + (s == Stream::kStderr ? "E " : " ") + std::string(line));
  }
  void OnEnded(const Job& job) override { ended = std::string(ToString(job.state)); }
  std::vector<std::string> lines;
  std::string ended;
  bool wants_output = true;  // false: a `wait`
  int resumed = 0;
};

// Supervisions of an inner host that record what the job table wants of
// their output, per job.
class WishHost final : public SupervisorHost {
 public:
  explicit WishHost(SupervisorHost& inner) : inner_(inner) {}
  std::string_view containment() const override { return inner_.containment(); }
  std::unique_ptr<Supervision> Start(const Job& job, SupervisionEvents& events) override {
    this->events[job.id] = &events;
    return std::make_unique<Wishing>(inner_.Start(job, events), wishes[job.id]);
  }
  std::map<std::string, std::vector<bool>> wishes;
  std::map<std::string, SupervisionEvents*> events;

 private:
  class Wishing final : public Supervision {
   public:
    Wishing(std::unique_ptr<Supervision> inner, std::vector<bool>& wishes)
        : inner_(std::move(inner)), wishes_(wishes) {}
    void Kill(KillOrder order, Done done) override {
      inner_->Kill(std::move(order), std::move(done));
    }
    void SetOutput(bool on) override { wishes_.push_back(on); }

   private:
    std::unique_ptr<Supervision> inner_;
    std::vector<bool>& wishes_;
  };
  SupervisorHost& inner_;
};

class JobManagerTest : public ManagerFixture {
 protected:
  JobManagerTest() : ManagerFixture("jm") { Reset(); }

  void Reset(int slots = 8, StackSampler* sampler = nullptr, size_t keep = 10000) {
    ManagerConfig config;
    config.placement.slots = slots;
    config.keep_finished = keep;
    RunnerConfig runner;
    runner.restart_backoff = Millis(0);
    runner.stack_budget = Millis(3000);
    Make(config, runner, sampler);
  }

  JobSpec Spec(int devices, std::vector<std::string> argv = {"/bin/true"}) {
    JobSpec s;
    s.devices = devices;
    s.argv = std::move(argv);
    s.cwd = "/";
    s.uid = getuid();
    s.gid = getgid();
    s.env = {"PATH=/usr/bin:/bin", "HOME=/root"};
    s.grace = Millis(1000);
    return s;
  }

  // In-process supervision answers at once.
  absl::Status Kill(const std::string& id, int signal) {
    std::optional<absl::Status> answer;
    KillOrder order = signal == 0 ? KillOrder::Teardown("alice") : KillOrder::Signal(signal, false);
    manager_->Kill(id, std::move(order), [&](absl::Status s) { answer = s; });
    EXPECT_TRUE(answer.has_value());
    return answer.value_or(absl::InternalError("no answer"));
  }
};

TEST_F(JobManagerTest, CleanJobSucceeds) {
  const std::string id = Submit(Spec(4));
  EXPECT_EQ(Get(id).state, JobState::kRunning);
  ASSERT_EQ(launcher_.procs.size(), 4u);
  EXPECT_EQ(launcher_.Env(id, 3, "RANK"), "3");
  EXPECT_EQ(launcher_.Env(id, 3, "WORLD_SIZE"), "4");
  EXPECT_EQ(launcher_.Env(id, 0, "MASTER_PORT"), "30000");
  EXPECT_EQ(launcher_.Env(id, 0, "OMP_NUM_THREADS"), "1");
  EXPECT_EQ(launcher_.Env(id, 0, "HOME"), "/root");
  for (int r = 0; r < 4; ++r) launcher_.Exit(id, r, 0);
  EXPECT_EQ(Get(id).state, JobState::kRunning);  // until the job is known empty
  clock_.Advance(Millis(0));
  const Job& job = Get(id);
  EXPECT_EQ(job.state, JobState::kSucceeded);
  EXPECT_EQ(job.exit_code, 0);
  EXPECT_FALSE(job.root_cause);
  EXPECT_TRUE(launcher_.signals.empty());
  EXPECT_EQ(launcher_.killed_jobs, std::vector<std::string>{id});  // leftovers swept anyway
  EXPECT_EQ(clock_.pending_timers(), 0u);
}

TEST_F(JobManagerTest, ClientOmpNumThreadsWins) {
  JobSpec spec = Spec(1);
  spec.env.push_back("OMP_NUM_THREADS=8");
  const std::string id = Submit(spec);
  EXPECT_EQ(launcher_.Env(id, 0, "OMP_NUM_THREADS"), "8");
}

// Debian 13's torch has no libuv TCPStore: ranks get the other one
// unless the user asked for a store.
TEST_F(JobManagerTest, RanksGetTheTcpStoreWithoutLibuvUnlessTheUserChose) {
  const std::string id = Submit(Spec(2));
  EXPECT_EQ(launcher_.Env(id, 0, "USE_LIBUV"), "0");
  EXPECT_EQ(launcher_.Env(id, 1, "USE_LIBUV"), "0");
  JobSpec spec = Spec(1);
  spec.env.push_back("USE_LIBUV=1");
  const std::string chose = Submit(spec);
  const auto& env = launcher_.Find(chose, 0).request.env;
  EXPECT_EQ(std::count_if(env.begin(), env.end(),
                          [](const std::string& kv) { return kv.starts_with("USE_LIBUV="); }),
            1);
  EXPECT_EQ(launcher_.Env(chose, 0, "USE_LIBUV"), "1");
}

TEST_F(JobManagerTest, KillCancelsWith130) {
  const std::string id = Submit(Spec(2));
  ASSERT_TRUE(Kill(id, 0).ok());
  launcher_.ExitSignalled(id);
  clock_.Advance(Millis(0));
  const Job& job = Get(id);
  EXPECT_EQ(job.state, JobState::kCancelled);
  EXPECT_EQ(job.exit_code, 130);
  EXPECT_EQ(job.root_cause->rank, -1);
  EXPECT_EQ(job.root_cause->reason, CauseReason::kCancelled);
  // Who asked, in the record and in words.
  EXPECT_EQ(job.root_cause->cancelled_by, "alice");
  EXPECT_EQ(job.root_cause->message, "cancelled by alice");
  EXPECT_EQ(JobFromJson(ToJson(job))->root_cause->cancelled_by, "alice");  // it is saved
  EXPECT_FALSE(Kill(id, 0).ok());                                          // already ended
}

TEST_F(JobManagerTest, APendingJobCancelledByRootSaysSo) {
  Submit(Spec(8));
  const std::string pending = Submit(Spec(1));
  std::optional<absl::Status> answer;
  manager_->Kill(pending, KillOrder::Teardown("root"), [&](absl::Status s) { answer = s; });
  ASSERT_TRUE(answer && answer->ok());
  EXPECT_EQ(Get(pending).state, JobState::kCancelled);
  EXPECT_EQ(Get(pending).root_cause->message, "cancelled by root");
  EXPECT_EQ(Get(pending).root_cause->cancelled_by, "root");
}

TEST_F(JobManagerTest, KillWithSignalSignalsEachRanksMainProcess) {
  const std::string id = Submit(Spec(2));
  ASSERT_TRUE(Kill(id, SIGUSR1).ok());
  // As torchrun and `docker kill`: the main process, not its workers.
  EXPECT_TRUE(launcher_.signals.empty());
  ASSERT_EQ(launcher_.process_signals.size(), 2u);
  EXPECT_EQ(launcher_.process_signals[0].second, SIGUSR1);
  EXPECT_EQ(Get(id).state, JobState::kRunning);
  // --all-processes: every process of each rank.
  std::optional<absl::Status> answer;
  manager_->Kill(id, KillOrder::Signal(SIGUSR2, true), [&](absl::Status s) { answer = s; });
  ASSERT_TRUE(answer && answer->ok());
  ASSERT_EQ(launcher_.signals.size(), 2u);
  EXPECT_EQ(launcher_.signals[1].second, SIGUSR2);
  EXPECT_EQ(launcher_.process_signals.size(), 2u);
}

TEST_F(JobManagerTest, BadRequestsChangeNothing) {
  EXPECT_FALSE(manager_->Submit(Spec(0), "a").ok());
  EXPECT_FALSE(manager_->Submit(Spec(9), "a").ok());
  JobSpec digits = Spec(1);
  digits.name = "123";
  EXPECT_FALSE(manager_->Submit(digits, "a").ok());
  JobSpec huge = Spec(1);
  huge.name = std::string(129, 'n');
  EXPECT_FALSE(manager_->Submit(huge, "a").ok());
  JobSpec spaces = Spec(1);
  spaces.name = "a b";
  EXPECT_FALSE(manager_->Submit(spaces, "a").ok());
  // Whatever a raw client sends: durations out of range, restarts past the
  // limit, more argv and environment than execve takes.
  auto refused = [&](std::function<void(JobSpec&)> spoil, std::string_view says) {
    JobSpec spec = Spec(1);
    spoil(spec);
    auto r = manager_->Submit(spec, "a");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(r.status().message()).find(says), std::string::npos) << r.status();
  };
  refused([](JobSpec& s) { s.grace = Millis(-1); }, "--grace must not be negative");
  refused([](JobSpec& s) { s.grace = Millis(90'000'000); }, "--grace 90000000ms is more than 24h");
  refused([](JobSpec& s) { s.heartbeat_timeout = Millis(INT64_MAX); }, "--heartbeat-timeout");
  refused([](JobSpec& s) { s.startup_timeout = Millis(-5); }, "--startup-timeout");
  refused([](JobSpec& s) { s.max_restarts = 2147483647; }, "the limit of this ltd");
  refused([](JobSpec& s) { s.max_restarts = -1; }, "--max-restarts -1");
  refused([](JobSpec& s) { s.env.assign(40, std::string(64 * 1024, 'x')); }, "at most");
  // Many tiny strings fit the bytes but not the count (16.6 MB per job).
  refused([](JobSpec& s) { s.env.assign(300'001, "A="); }, "environment strings; ltd takes");
  refused([](JobSpec& s) { s.argv.clear(); }, "no program given");
  // An array's records together: 1000 tasks of 100 KB are 100 MB.
  refused(
      [](JobSpec& s) {
        s.argv.push_back(std::string(100'000, 'a'));
        for (uint32_t t = 0; t < 1000; ++t) s.array_tasks.push_back(t);
      },
      "bytes of records; one submit makes at most 67108864: submit fewer tasks at once");
  EXPECT_TRUE(manager_->List(true).empty());
  EXPECT_TRUE(launcher_.procs.empty());
}

TEST_F(JobManagerTest, JobsQueueForDevicesInOrder) {
  const std::string a = Submit(Spec(6));
  const std::string b = Submit(Spec(4));
  const std::string c = Submit(Spec(1));
  EXPECT_EQ(Get(b).state, JobState::kPending);
  EXPECT_EQ(Get(c).state, JobState::kPending);  // FIFO: no overtaking b
  for (int r = 0; r < 6; ++r) launcher_.Exit(a, r, 0);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get(b).state, JobState::kRunning);
  EXPECT_EQ(Get(c).state, JobState::kRunning);
  EXPECT_NE(Get(b).master_port, Get(c).master_port);
}

// A pending job's environment waits on disk, not in memory; it comes back
// when the job starts. A finished job keeps a summary.
TEST_F(JobManagerTest, APendingJobsEnvironmentWaitsOnDisk) {
  const std::string a = Submit(Spec(8));
  JobSpec spec = Spec(8);
  spec.env.push_back("LT_TEST_MINE=42");
  const std::string b = Submit(spec);
  EXPECT_EQ(Get(b).state, JobState::kPending);
  EXPECT_TRUE(Get(b).spec.env.empty());
  EXPECT_TRUE(Get(b).table.spec_on_disk);
  for (int r = 0; r < 8; ++r) launcher_.Exit(a, r, 0);
  clock_.Advance(Millis(0));
  ASSERT_EQ(Get(b).state, JobState::kRunning);
  EXPECT_EQ(launcher_.Env(b, 0, "LT_TEST_MINE"), "42");
  for (int r = 0; r < 8; ++r) launcher_.Exit(b, r, 0);
  clock_.Advance(Millis(0));
  ASSERT_TRUE(IsFinal(Get(b).state));
  EXPECT_TRUE(Get(b).spec.env.empty()) << "a finished job keeps its environment in memory";
}

// So does its command line past what a finished job's summary keeps (an
// array of 1000 tasks of 2 MB arguments held 1.8 GB): `show` reads it from
// the record, and the job starts with all of it.
TEST_F(JobManagerTest, APendingJobsCommandLineWaitsOnDiskButItsHead) {
  const std::string a = Submit(Spec(8));
  JobSpec spec = Spec(8);
  for (int i = 0; i < 50; ++i) spec.argv.push_back(std::string(20'000, 'a' + i % 26));
  const std::vector<std::string> whole = spec.argv;
  const std::string b = Submit(spec);
  ASSERT_EQ(Get(b).state, JobState::kPending);
  // One cancelled while it waits keeps all of it in its final record.
  const std::string c = Submit(spec);
  ASSERT_TRUE(Kill(c, 0).ok());
  ASSERT_EQ(Get(c).state, JobState::kCancelled);
  EXPECT_EQ(store_->Load(c)->spec.argv, whole);
  size_t held = 0;
  for (const std::string& arg : Get(b).spec.argv) held += arg.size();
  EXPECT_LE(held, JobManager::kSummaryArgvBytes);
  EXPECT_EQ(held + Get(b).table.argv_cut, 1'000'000u + whole.front().size());
  EXPECT_EQ(store_->Load(b)->spec.argv, whole);
  for (int r = 0; r < 8; ++r) launcher_.Exit(a, r, 0);
  clock_.Advance(Millis(0));
  ASSERT_EQ(Get(b).state, JobState::kRunning);
  EXPECT_EQ(launcher_.Find(b, 0).request.argv, whole);
  EXPECT_EQ(Get(b).table.argv_cut, 0u);
}

// A job that starts at once is placed before its record is saved, and
// saved once, placed. A disk that refuses that record refuses the submit
// in one line, and leaves nothing of it placed: the next job gets its
// slots and its port.
TEST_F(JobManagerTest, AJobStartingAtOnceWhoseRecordIsRefusedHoldsNoSlotOrPort) {
  const std::string small = dir_ + "/small";
  ASSERT_EQ(mkdir(small.c_str(), 0711), 0);
  if (mount("tmpfs", small.c_str(), "tmpfs", 0, "size=4m,nr_inodes=200,mode=0711") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  }
  struct AtExit {
    std::function<void()> f;
    ~AtExit() { f(); }
  } unmount{[&] {
    manager_.reset();
    host_.reset();
    store_.reset();
    umount2(small.c_str(), MNT_DETACH);
  }};
  store_ = std::make_unique<JobStore>(*JobStore::Open(small));
  Reset();
  // A first job reserves ids on disk (a write of its own) and ends.
  const std::string first = Submit(Spec(8));
  for (int r = 0; r < 8; ++r) launcher_.Exit(first, r, 0);
  clock_.Advance(Millis(0));
  ASSERT_EQ(Get(first).state, JobState::kSucceeded);

  // Every inode taken but two: the job's dir and its errors/ are made,
  // its record is not.
  std::vector<std::string> fillers;
  for (int i = 0;; ++i) {
    const std::string f = small + "/filler" + std::to_string(i);
    const int fd = open(f.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) break;
    close(fd);
    fillers.push_back(f);
  }
  ASSERT_GE(fillers.size(), 12u);
  auto free_inodes = [&](size_t n) {
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(unlink(fillers.back().c_str()), 0);
      fillers.pop_back();
    }
  };
  free_inodes(2);
  auto refused = manager_->Submit(Spec(8), "alice");
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "cannot record the job"))
      << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "job.json"))
      << "refused before its record was written: " << refused.status();

  free_inodes(10);
  const std::string next = Submit(Spec(8));
  EXPECT_EQ(Get(next).state, JobState::kRunning) << "the refused job's slots are still held";
  EXPECT_EQ(launcher_.Env(next, 0, "MASTER_PORT"), "30000") << "the refused job's port is held";
  // Its record on disk says where it runs.
  auto recorded = store_->Load(next);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_EQ(recorded->device_slots.size(), 8u);
  EXPECT_EQ(recorded->master_port, 30000);
}

TEST_F(JobManagerTest, CancellingAPendingJob) {
  Submit(Spec(8));
  const std::string b = Submit(Spec(2));
  ASSERT_TRUE(Kill(b, 0).ok());
  EXPECT_EQ(Get(b).state, JobState::kCancelled);
  EXPECT_EQ(Get(b).exit_code, 130);
}

TEST_F(JobManagerTest, RestartsAfterCompleteTeardown) {
  JobSpec spec = Spec(2);
  spec.max_restarts = 2;
  const std::string id = Submit(spec);
  for (int attempt = 0; attempt < 2; ++attempt) {
    EXPECT_EQ(launcher_.Env(id, 0, "TORCHELASTIC_RESTART_COUNT"), std::to_string(attempt));
    launcher_.Exit(id, 1, 5);
    launcher_.ExitSignalled(id);
    EXPECT_EQ(launcher_.procs.size(), 2u * (attempt + 1));  // not before the job is empty
    clock_.Advance(Millis(0));
  }
  ASSERT_EQ(launcher_.procs.size(), 6u);
  EXPECT_EQ(launcher_.Env(id, 1, "TORCHELASTIC_RESTART_COUNT"), "2");
  EXPECT_EQ(launcher_.Env(id, 1, "TORCHELASTIC_MAX_RESTARTS"), "2");
  launcher_.Exit(id, 0, 0);
  launcher_.Exit(id, 1, 0);
  clock_.Advance(Millis(0));
  const Job& job = Get(id);
  EXPECT_EQ(job.state, JobState::kSucceeded);
  EXPECT_EQ(job.restart_count, 2);
  ASSERT_EQ(job.attempts.size(), 3u);
  EXPECT_EQ(job.attempts[0].root_cause->exit_code, 5);
  EXPECT_FALSE(job.attempts[2].root_cause);
  EXPECT_EQ(ports_.picks.size(), 1u);  // restarts keep the job's port
  EXPECT_EQ(job.attempts[2].master_port, job.attempts[0].master_port);
}

TEST_F(JobManagerTest, RestartsWaitABackoffThatDoublesAndAKillEndsTheWait) {
  ManagerConfig config;
  config.placement.slots = 8;
  RunnerConfig runner;
  runner.restart_backoff = Millis(1000);
  Make(config, runner);
  JobSpec spec = Spec(1);
  spec.max_restarts = 50;
  const std::string id = Submit(spec);
  for (Millis delay : {Millis(1000), Millis(2000), Millis(4000)}) {
    const size_t started = launcher_.procs.size();
    launcher_.Exit(id, 0, 1);
    clock_.Advance(Millis(0));
    clock_.Advance(delay - Millis(1));
    EXPECT_EQ(launcher_.procs.size(), started)
        << "restarted before its backoff of " << delay.count();
    EXPECT_EQ(Get(id).state, JobState::kRunning);
    clock_.Advance(Millis(1));
    EXPECT_EQ(launcher_.procs.size(), started + 1);
  }
  // Killed while it waits to restart: it ends at once, cancelled.
  launcher_.Exit(id, 0, 1);
  clock_.Advance(Millis(0));
  EXPECT_FALSE(Kill(id, SIGUSR1).ok());  // nothing runs to signal
  ASSERT_TRUE(Kill(id, 0).ok());
  EXPECT_EQ(Get(id).state, JobState::kCancelled);
  clock_.Advance(Millis(60000));
  EXPECT_EQ(launcher_.procs.size(), 4u);  // and no attempt ever comes
  EXPECT_EQ(clock_.pending_timers(), 0u);
}

TEST_F(JobManagerTest, ObserversSeeLinesAndTheEnd) {
  const std::string id = Submit(Spec(2));
  auto rec = std::make_shared<Recorder>();
  ASSERT_TRUE(manager_->Observe(id, rec));
  launcher_.Output(id, 0, Stream::kStdout, "hel");
  launcher_.Output(id, 0, Stream::kStdout, "lo\nwor");
  launcher_.Output(id, 1, Stream::kStderr, "bad\n");
  launcher_.Output(id, 0, Stream::kStdout, "");  // EOF flushes "wor"
  launcher_.Exit(id, 0, 0);
  launcher_.Exit(id, 1, 0);
  clock_.Advance(Millis(0));
  EXPECT_EQ(rec->lines, (std::vector<std::string>{"0 hello", "1E bad", "0 wor"}));
  EXPECT_EQ(rec->ended, "SUCCEEDED");
  EXPECT_FALSE(manager_->Observe(id, rec));  // ended: nothing more to observe
}

TEST_F(JobManagerTest, OutputIsOnWhileAnObserverWantsIt) {
  WishHost wish_host(*host_);
  ManagerConfig config;
  config.placement.slots = 8;
  manager_ = std::make_unique<JobManager>(clock_, wish_host, *store_, ports_, config);
  const std::string id = Submit(Spec(1));
  using W = std::vector<bool>;
  EXPECT_EQ(wish_host.wishes[id], W{false});  // nobody watches a new job
  EXPECT_FALSE(manager_->OutputFlowing(id));
  auto wait = std::make_shared<Recorder>();
  wait->wants_output = false;
  auto attach = std::make_shared<Recorder>();
  auto follow = std::make_shared<Recorder>();
  const auto w = manager_->Observe(id, wait);
  EXPECT_EQ(wish_host.wishes[id], W{false});  // a wait needs no output
  const auto a = manager_->Observe(id, attach);
  EXPECT_EQ(wish_host.wishes[id], (W{false, true}));
  const auto f = manager_->Observe(id, follow);
  manager_->Unobserve(id, *a);
  EXPECT_EQ(wish_host.wishes[id], (W{false, true}));  // the follower still watches
  EXPECT_FALSE(manager_->OutputFlowing(id));          // asked, not answered
  // It flows, and never stopped: nothing for the follower to read again.
  wish_host.events[id]->OnOutputResumed(false);
  EXPECT_EQ(follow->resumed, 0);
  EXPECT_TRUE(manager_->OutputFlowing(id));
  // The supervisor switched: the follower reads what it missed.
  wish_host.events[id]->OnOutputResumed(true);
  EXPECT_EQ(follow->resumed, 1);
  EXPECT_TRUE(manager_->OutputFlowing(id));
  manager_->Unobserve(id, *f);
  EXPECT_EQ(wish_host.wishes[id], (W{false, true, false}));
  manager_->Unobserve(id, *w);
  EXPECT_EQ(wish_host.wishes[id], (W{false, true, false}));

  // An attached submit: watched before its supervision starts (the job
  // waits for devices), so it never goes off.
  const std::string big = Submit(Spec(8));
  ASSERT_EQ(Get(big).state, JobState::kPending);
  ASSERT_TRUE(manager_->Observe(big, std::make_shared<Recorder>()));
  launcher_.Exit(id, 0, 0);
  clock_.Advance(Millis(0));
  ASSERT_EQ(Get(big).state, JobState::kRunning);
  EXPECT_EQ(wish_host.wishes[big], W{});
  EXPECT_TRUE(manager_->OutputFlowing(big));
  manager_.reset();  // before the host it uses
}

TEST_F(JobManagerTest, ANameIsOneLiveJobOfItsUserAndTheNewestOfTheFinished) {
  JobSpec s = Spec(1);
  s.name = "train";
  const std::string a = Submit(s);
  EXPECT_EQ((*manager_->Resolve("train", s.uid))->id, a);
  // A second live job of that name and user is refused, naming the first.
  auto twin = manager_->Submit(s, "alice");
  ASSERT_FALSE(twin.ok());
  EXPECT_EQ(twin.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(twin.status().message().find("job " + a + " (RUNNING)"), std::string::npos)
      << twin.status();
  EXPECT_EQ(twin.status().message().find('\n'), std::string::npos);
  // Another user may use the name; so may the same user once it ended.
  JobSpec other = s;
  other.uid = s.uid + 1;
  const std::string o = Submit(other);
  launcher_.Exit(o, 0, 0);
  launcher_.Exit(a, 0, 0);
  clock_.Advance(Millis(0));
  const std::string b = Submit(s);
  EXPECT_EQ((*manager_->Resolve("train", s.uid))->id, b);  // the live one
  launcher_.Exit(b, 0, 0);
  clock_.Advance(Millis(0));
  // All finished: the newest, as a re-run is.
  EXPECT_EQ((*manager_->Resolve("train", s.uid))->id, b);
  EXPECT_EQ((*manager_->Resolve("train"))->id, b);  // root: everyone's newest
  EXPECT_EQ((*manager_->Resolve(a))->id, a);        // ids always work
  EXPECT_EQ(manager_->Resolve("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobManagerTest, ANameMeansTheCallersOwnJobsFirst) {
  JobSpec alice = Spec(1);
  alice.name = "train";
  alice.uid = 1001;
  JobSpec bob = alice;
  bob.uid = 1002;
  const std::string bobs = Submit(bob);
  launcher_.Exit(bobs, 0, 0);  // bob's train ended
  clock_.Advance(Millis(0));
  const std::string alices = Submit(alice);  // alice's train runs
  // Bob means his own, finished job, not alice's running one.
  EXPECT_EQ((*manager_->Resolve("train", 1002))->id, bobs);
  EXPECT_EQ((*manager_->Resolve("train", 1001))->id, alices);
  // Someone with no job of that name (and root) sees everyone's.
  EXPECT_EQ((*manager_->Resolve("train", 1003))->id, alices);  // the live one
  EXPECT_EQ((*manager_->Resolve("train", 0))->id, alices);
  const std::string bobs2 = Submit(bob);
  EXPECT_EQ((*manager_->Resolve("train", 1002))->id, bobs2);  // his live one
  EXPECT_FALSE(manager_->Resolve("train", 0).ok());           // two live: ambiguous
}

TEST_F(JobManagerTest, RecoverMarksRunningJobsWithoutSupervisorLostAndKeepsCounting) {
  const std::string done = Submit(Spec(1));
  launcher_.Exit(done, 0, 0);
  clock_.Advance(Millis(0));
  const std::string running = Submit(Spec(2));
  Reset();  // a new ltd on the same state dir
  manager_->Recover();
  EXPECT_EQ(Get(done).state, JobState::kSucceeded);
  const Job& lost = Get(running);
  EXPECT_EQ(lost.state, JobState::kLost);
  EXPECT_EQ(lost.root_cause->reason, CauseReason::kSupervisorLost);
  EXPECT_EQ(lost.exit_code, 1);
  EXPECT_EQ(lost.ranks[0].state, RankState::kLost);
  EXPECT_EQ(Submit(Spec(1)), "3");
}

// ltd's start reads the records once, then waits on the supervisors it
// found; one may end its job meanwhile. A live record is read again when
// recovered: the job is what its supervisor wrote last, not LOST.
TEST_F(JobManagerTest, RecoverReadsALiveRecordAgainAndAFinalOneOnce) {
  const std::string done = Submit(Spec(1));
  launcher_.Exit(done, 0, 0);
  clock_.Advance(Millis(0));
  const std::string running = Submit(Spec(1));
  Reset();  // a new ltd on the same state dir
  auto records = JobManager::ReadRecords(*store_);
  ASSERT_EQ(records.size(), 2u);
  auto ended = store_->Load(running);
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->state, JobState::kRunning);
  ended->state = JobState::kSucceeded;  // as its supervisor writes it at the end
  ended->exit_code = 0;
  ended->ended_at = clock_.Now();
  ASSERT_TRUE(store_->Save(*ended).ok());
  manager_->Recover(std::move(records), nullptr);
  EXPECT_EQ(Get(running).state, JobState::kSucceeded);
  EXPECT_EQ(Get(done).state, JobState::kSucceeded);
  EXPECT_EQ(Submit(Spec(1)), "3");
}

TEST_F(JobManagerTest, OnlyTheNewestFinishedJobsAreKept) {
  Reset(8, nullptr, 2);
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(Submit(Spec(1)));
    launcher_.Exit(ids.back(), 0, 0);
    clock_.Advance(Millis(0));
  }
  const std::string live = Submit(Spec(1));  // running jobs never go
  EXPECT_FALSE(manager_->Resolve(ids[0]).ok());
  EXPECT_FALSE(std::filesystem::exists(store_->JobDir(ids[0])));
  EXPECT_TRUE(manager_->Resolve(ids[1]).ok());
  EXPECT_TRUE(manager_->Resolve(live).ok());
  EXPECT_EQ(manager_->List(true).size(), 3u);
  Reset(8, nullptr, 1);  // a restart with a smaller bound prunes at once
  manager_->Recover();   // `live` is LOST now, and the newest final job
  EXPECT_FALSE(manager_->Resolve(ids[2]).ok());
  EXPECT_EQ(Get(live).state, JobState::kLost);
  EXPECT_EQ(Submit(Spec(1)), "5");
}

// A client that lost ltd before the job's id came back submits again with
// the same token: it gets the job made then, after a restart of ltd too;
// another user's token, another token, or one past its hour makes a job.
TEST_F(JobManagerTest, ARepeatedSubmitTokenGetsTheJobItMade) {
  JobSpec spec = Spec(1);
  spec.name = "tok";
  spec.submit_token = "0123456789abcdef";
  const std::string id = Submit(spec);
  EXPECT_EQ(Submit(spec), id);  // its name in use is no refusal: it is the same submit
  EXPECT_EQ(manager_->List(true).size(), 1u);
  Reset();  // a new ltd on the same state dir: the token is in the record
  manager_->Recover();
  EXPECT_EQ(Submit(spec), id);
  spec.name = "";
  JobSpec others = spec;
  others.uid = spec.uid + 1;
  EXPECT_NE(Submit(others), id);
  JobSpec fresh = spec;
  fresh.submit_token = "another";
  EXPECT_NE(Submit(fresh), id);
  clock_.Advance(SubmitTokens::kMaxAge + Millis(1));
  EXPECT_NE(Submit(spec), id);
  EXPECT_EQ(manager_->List(true).size(), 4u);
}

TEST(SubmitTokens, BoundedInNumberAndAge) {
  SubmitTokens tokens;
  const WallTime t0 = WallTime(std::chrono::seconds(1'800'000'000));
  for (size_t i = 0; i <= SubmitTokens::kPerUser; ++i) {
    tokens.Remember(7, "t" + std::to_string(i), std::to_string(i), t0 + Millis(i));
  }
  EXPECT_FALSE(tokens.Find(7, "t0", t0));  // the oldest went first
  EXPECT_EQ(tokens.Find(7, "t1", t0), "1");
  EXPECT_FALSE(tokens.Find(8, "t1", t0));  // another user's
  EXPECT_FALSE(tokens.Find(7, "", t0));
  EXPECT_EQ(tokens.Find(7, "t5", t0 + SubmitTokens::kMaxAge), "5");
  EXPECT_FALSE(tokens.Find(7, "t5", t0 + SubmitTokens::kMaxAge + Millis(6)));
  tokens.Remember(7, "", "x", t0);  // no token: nothing kept
  EXPECT_FALSE(tokens.Find(7, "", t0));
}

TEST_F(JobManagerTest, ShutdownTearsEverythingDownThenReports) {
  const std::string a = Submit(Spec(2));
  Submit(Spec(8));  // pending
  bool done = false;
  manager_->Shutdown(/*end_jobs=*/true, [&] { done = true; });
  EXPECT_FALSE(done);
  EXPECT_FALSE(manager_->Submit(Spec(1), "a").ok());
  launcher_.ExitSignalled(a);
  clock_.Advance(Millis(0));
  EXPECT_TRUE(done);
  EXPECT_EQ(Get(a).state, JobState::kCancelled);
  EXPECT_EQ(Get(a).root_cause->message, "ltd shut down");
  EXPECT_EQ(Get(a).root_cause->cancelled_by, JobManager::kByLtd);
}

}  // namespace
}  // namespace ltd::test
