// A rank's fd-3 lines that say again what it said already cost nothing:
// no record to ltd, no log line, no timer. A rank writing `auto on`,
// `timeout 30s` or the same `error` in a loop once grew ltd by gigabytes
// (each `auto on` sent the whole record at once). Fake launcher and clock.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "fakes.h"
#include "job_runner.h"

namespace ltd::test {
namespace {

class Changes final : public SupervisionEvents {
 public:
  void OnChanged(const Job&, Change change) override { ++count[change]; }
  void OnOutput(int, Stream, std::string_view) override {}
  void OnEnded(const Job&) override {}
  void OnLost(std::string) override {}
  std::map<Change, int> count;
};

class HeartbeatLines : public ::testing::Test {
 protected:
  HeartbeatLines() {
    char tmpl[] = "/tmp/ltd-hblines.XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = std::make_unique<JobStore>(*JobStore::Open(dir_));
    Job job;
    job.id = "1";
    job.spec.devices = 1;
    job.spec.argv = {"python3", "train.py"};
    job.spec.cwd = "/";
    job.spec.uid = getuid();
    job.spec.gid = getgid();
    job.spec.heartbeat_timeout = Millis(60'000);
    EXPECT_TRUE(store_->CreateJobDir(job.id).ok());
    RunnerConfig config;
    config.auto_heartbeat_timeout = Millis(60'000);
    runner_ =
        std::make_unique<JobRunner>(clock_, launcher_, *store_, nullptr, config, job, events_);
    runner_->Start();
  }
  ~HeartbeatLines() override {
    runner_.reset();
    std::filesystem::remove_all(dir_);
  }
  // `line` `n` times, in one read as a flooding rank's would come.
  void Repeat(const std::string& line, int n) {
    std::string bytes;
    for (int i = 0; i < n; ++i) bytes += line + "\n";
    launcher_.Control("1", 0, bytes);
  }

  std::string dir_;
  std::unique_ptr<JobStore> store_;
  FakeClock clock_;
  FakeLauncher launcher_{clock_};
  Changes events_;
  std::unique_ptr<JobRunner> runner_;
};

TEST_F(HeartbeatLines, AutoOnAgainChangesNothing) {
  const int before = events_.count[Change::kCourse];
  Repeat("auto on", 1000);
  EXPECT_EQ(events_.count[Change::kCourse], before + 1) << "each `auto on` sent a record";
  EXPECT_EQ(runner_->job().heartbeat_mode, HeartbeatMode::kAutomatic);
}

TEST_F(HeartbeatLines, TheSameTimeoutAgainIsABeatAndNoTimer) {
  Repeat("timeout 30s", 1);
  const size_t timers = clock_.pending_timers();
  const int courses = events_.count[Change::kCourse];
  Repeat("timeout 30s", 1000);
  EXPECT_EQ(clock_.pending_timers(), timers);
  EXPECT_EQ(events_.count[Change::kCourse], courses);
  EXPECT_EQ(runner_->job().hang_timeout, Millis(30'000));
  // Still a beat: the watchdog counts from the last one.
  clock_.Advance(Millis(20'000));
  Repeat("timeout 30s", 1);
  clock_.Advance(Millis(20'000));
  EXPECT_FALSE(IsFinal(runner_->job().state))
      << "a repeated timeout line stopped counting as a beat";
  // A new value is news.
  Repeat("timeout 5s", 1);
  EXPECT_EQ(runner_->job().hang_timeout, Millis(5'000));
}

TEST_F(HeartbeatLines, TheSameErrorAgainChangesNothing) {
  Repeat("error CUDA out of memory", 1);
  const int details = events_.count[Change::kDetail];
  EXPECT_EQ(details, 1);
  Repeat("error CUDA out of memory", 1000);
  EXPECT_EQ(events_.count[Change::kDetail], details);
  Repeat("error another one", 1);
  EXPECT_EQ(events_.count[Change::kDetail], details + 1);
  EXPECT_EQ(runner_->job().ranks[0].error_message, "another one");
}

}  // namespace
}  // namespace ltd::test
