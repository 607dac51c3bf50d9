// A JobRunner driven directly: job "1" with a fake launcher, a fake
// sampler and a fake clock, and what it reports.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <optional>

#include "fakes.h"
#include "job_runner.h"

namespace ltd::test {

class RunnerEvents final : public SupervisionEvents {
 public:
  void OnChanged(const Job&, Change) override {}
  void OnOutput(int rank, Stream s, std::string_view line) override {
    lines.push_back(std::to_string(rank) + (s == Stream::kStderr ? "E " : " ") + std::string(line));
  }
  void OnEnded(const Job& job) override { ended = job; }
  void OnLost(std::string) override {}
  std::vector<std::string> lines;
  std::optional<Job> ended;
};

class RunnerFixture : public ::testing::Test {
 protected:
  RunnerFixture() {
    char tmpl[] = "/tmp/ltd-jr.XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = std::make_unique<JobStore>(*JobStore::Open(dir_));
  }
  ~RunnerFixture() override {
    runner_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  JobSpec Spec(int devices, std::vector<std::string> argv = {"/bin/true"}) {
    JobSpec s;
    s.devices = devices;
    s.argv = std::move(argv);
    s.cwd = "/";
    s.uid = getuid();
    s.gid = getgid();
    s.env = {"PATH=/usr/bin:/bin"};
    s.grace = Millis(1000);
    return s;
  }

  // Starts job "1" of `spec`; stacks come from `sampler_` where `with_stacks_`.
  void Run(JobSpec spec, RunnerConfig config = Config()) {
    Job job;
    job.id = id_;
    job.spec = std::move(spec);
    job.master_port = 30000;
    ASSERT_TRUE(store_->CreateJobDir(job.id).ok());
    runner_ =
        std::make_unique<JobRunner>(clock_, launcher_, *store_, with_stacks_ ? &sampler_ : nullptr,
                                    std::move(config), std::move(job), events_);
    runner_->Start();
  }
  static RunnerConfig Config() {
    RunnerConfig c;
    c.restart_backoff = Millis(0);
    c.stack_budget = Millis(3000);
    return c;
  }

  // Three ranks beat to step 4; then every one stalls.
  void HungJob(int max_restarts = 0) {
    JobSpec spec = Spec(3);
    spec.heartbeat_timeout = Millis(1000);
    spec.max_restarts = max_restarts;
    Run(spec);
    BeatAndStall();
  }
  void BeatAndStall() {
    for (int r = 0; r < 3; ++r) launcher_.Control(id_, r, "hb 4\n");
    clock_.Advance(Millis(1001));
  }

  const Job& Get() const { return runner_->job(); }

  const std::string id_ = "1";
  std::string dir_;
  std::unique_ptr<JobStore> store_;
  FakeClock clock_;
  FakeLauncher launcher_{clock_};
  FakeSampler sampler_;
  bool with_stacks_ = false;
  RunnerEvents events_;
  std::unique_ptr<JobRunner> runner_;
};

}  // namespace ltd::test
