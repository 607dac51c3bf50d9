// GPUs checked free before reuse, with a fake NVML and a fake clock: which
// released GPU is quarantined, how it is described, when it comes back, and
// what the job table makes of it (placement, pending reasons, slots).
#include "gpu_pool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "fakes.h"
#include "job_manager.h"
#include "local_host.h"
#include "manager_fixture.h"

namespace ltd::test {
namespace {

class FakeGpus final : public GpuInfo {
 public:
  absl::StatusOr<int> Count() override { return count; }
  absl::StatusOr<std::vector<GpuProcess>> Processes(int index) override {
    if (failing) return absl::UnavailableError("nvmlDeviceGetComputeRunningProcesses: GPU is lost");
    return procs[index];
  }
  absl::StatusOr<GpuUsage> Usage(int index) override {
    GpuUsage u;
    u.used_mib = 100 + static_cast<uint64_t>(index);
    u.total_mib = 16384;
    u.utilization = 50;
    return u;
  }
  int count = 2;
  bool failing = false;
  std::map<int, std::vector<GpuProcess>> procs;
};

GpuProcess Proc(pid_t pid, std::optional<uint64_t> mib) { return GpuProcess{pid, mib}; }

TEST(GpuPool, ReleasedGpuHeldByAProcessIsQuarantinedUntilClean) {
  FakeClock clock;
  FakeGpus gpus;
  GpuPool pool(clock, &gpus, {"0", "3"}, GpuPool::Config{.leftover_mib = 100});
  std::vector<int> cleaned;
  pool.SetCallbacks([&](int slot) { cleaned.push_back(slot); }, nullptr);
  gpus.procs[3] = {Proc(getpid(), 3174), Proc(1, 50)};
  gpus.procs[0] = {Proc(1, 100)};  // at the threshold: ignored
  EXPECT_EQ(pool.CheckReleased({0, 1}), std::vector<int>{1});
  ASSERT_NE(pool.quarantine(1), nullptr);
  EXPECT_EQ(pool.quarantine(1)->since, clock.Now());
  ASSERT_EQ(pool.quarantine(1)->holders.size(), 1u);
  EXPECT_EQ(pool.Describe(1), "GPU 3 quarantined: pid " + std::to_string(getpid()) + " (" +
                                  ProcessUser(*ProcDir::Open(getpid())) + ") holds 3.1 GiB");
  EXPECT_EQ(pool.Describe(0), "");
  EXPECT_EQ(pool.AnyQuarantined(), 1);

  clock.Advance(Millis(10000));  // still held: still quarantined
  EXPECT_TRUE(cleaned.empty());
  gpus.procs[3].clear();
  clock.Advance(Millis(2000));
  EXPECT_EQ(cleaned, std::vector<int>{1});
  EXPECT_EQ(pool.quarantine(1), nullptr);
  EXPECT_EQ(clock.pending_timers(), 0u) << "rechecks go on with nothing quarantined";
}

TEST(GpuPool, UnknownMemoryAndAnUnreadableGpuCountAsHeld) {
  FakeClock clock;
  FakeGpus gpus;
  GpuPool pool(clock, &gpus, {"0", "1"}, GpuPool::Config{.leftover_mib = 1000});
  gpus.procs[0] = {Proc(4242, std::nullopt)};
  EXPECT_EQ(pool.CheckReleased({0}), std::vector<int>{0});
  EXPECT_NE(pool.Describe(0).find("pid 4242 ("), std::string::npos) << pool.Describe(0);
  EXPECT_NE(pool.Describe(0).find(") holds memory"), std::string::npos) << pool.Describe(0);
  gpus.failing = true;
  EXPECT_EQ(pool.CheckReleased({1}), std::vector<int>{1});
  EXPECT_EQ(pool.Describe(1), "GPU 1 quarantined: NVML cannot read it");
}

TEST(GpuPool, WithoutNvmlOrForLogicalSlotsNothingIsChecked) {
  FakeClock clock;
  GpuPool none(clock, nullptr, {"0"}, {});
  EXPECT_FALSE(none.checks_on());
  EXPECT_TRUE(none.CheckReleased({0}).empty());
  FakeGpus gpus;
  gpus.procs[0] = {Proc(1, 5000)};
  GpuPool logical(clock, &gpus, {}, {});
  EXPECT_FALSE(logical.checks_on());
  EXPECT_TRUE(logical.CheckReleased({0}).empty());
}

TEST(GpuPool, SamplesUsageAtItsInterval) {
  FakeClock clock;
  FakeGpus gpus;
  GpuPool pool(clock, &gpus, {"0", "1"}, GpuPool::Config{.sample = Millis(10000)});
  int samples = 0;
  pool.SetCallbacks(nullptr, [&] { ++samples; });
  pool.Start();
  EXPECT_EQ(samples, 1);
  ASSERT_TRUE(pool.usage(1));
  EXPECT_EQ(pool.usage(1)->used_mib, 101u);
  EXPECT_EQ(pool.usage(1)->utilization, 50u);
  clock.Advance(Millis(30000));
  EXPECT_EQ(samples, 4);
}

// Every process on a GPU is listed, up to a bound; `ltctl gpus` asking
// often samples at most once a second, and the timer goes on from there.
TEST(GpuPool, ListsEveryProcessUpToItsBoundAndSamplesOnAskAtMostOnceASecond) {
  FakeClock clock;
  FakeGpus gpus;
  GpuPool pool(clock, &gpus, {"0", "1"}, GpuPool::Config{.sample = Millis(10000)});
  int samples = 0;
  pool.SetCallbacks(nullptr, [&] { ++samples; });
  for (size_t i = 0; i < GpuPool::kMaxListed + 6; ++i) gpus.procs[1].push_back(Proc(1, 10));
  gpus.procs[0] = {Proc(getpid(), std::nullopt)};
  pool.Start();
  EXPECT_EQ(pool.minor(0), std::nullopt);  // this NVML has no minors
  ASSERT_NE(pool.processes(1), nullptr);
  EXPECT_EQ(pool.processes(1)->listed.size(), GpuPool::kMaxListed);
  EXPECT_EQ(pool.processes(1)->unlisted, 6u);
  ASSERT_EQ(pool.processes(0)->listed.size(), 1u);
  EXPECT_EQ(pool.processes(0)->listed[0].pid, getpid());
  EXPECT_EQ(pool.processes(0)->listed[0].used_mib, std::nullopt);
  EXPECT_EQ(pool.processes(0)->unlisted, 0u);

  gpus.procs[0].clear();
  pool.SampleUnlessFresherThan(Millis(1000));  // fresh: not sampled
  EXPECT_EQ(samples, 1);
  EXPECT_EQ(pool.processes(0)->listed.size(), 1u);
  clock.Advance(Millis(1000));
  pool.SampleUnlessFresherThan(Millis(1000));
  EXPECT_EQ(samples, 2);
  EXPECT_TRUE(pool.processes(0)->listed.empty());
  clock.Advance(Millis(9999));  // the timer restarted with that sample
  EXPECT_EQ(samples, 2);
  clock.Advance(Millis(1));
  EXPECT_EQ(samples, 3);

  gpus.failing = true;  // NVML cannot tell: nothing listed, not "none"
  clock.Advance(Millis(10000));
  EXPECT_EQ(pool.processes(0), nullptr);
}

TEST(FormatMib, MiBThenGiB) {
  EXPECT_EQ(FormatMib(512), "512 MiB");
  EXPECT_EQ(FormatMib(3174), "3.1 GiB");
}

class GpuManagerTest : public ManagerFixture {
 protected:
  GpuManagerTest() : ManagerFixture("gpu") {
    ManagerConfig config;
    config.placement.slots = 2;
    config.placement.gpu_ids = {"0", "1"};
    Make(config, RunnerConfig{});
    pool_.SetCallbacks([this](int slot) { manager_->GpuClean(slot); },
                       [this] { manager_->RefreshGpuUsage(); });
    manager_->SetGpuPool(&pool_);
  }
  // The manager goes before the pool it was given.
  ~GpuManagerTest() override { manager_.reset(); }
  std::string Submit(int devices) {
    JobSpec s;
    s.devices = devices;
    s.argv = {"/bin/true"};
    s.cwd = "/";
    s.uid = getuid();
    s.gid = getgid();
    auto id = manager_->Submit(std::move(s), "alice");
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : "";
  }

  FakeGpus gpus_;
  GpuPool pool_{clock_, &gpus_, {"0", "1"}, GpuPool::Config{.recheck = Millis(2000)}};
};

TEST_F(GpuManagerTest, LeftoverQuarantinesTheGpuAndThePendingJobNamesIt) {
  const std::string first = Submit(2);
  EXPECT_EQ(Get(first).cuda_visible_devices, "0,1");
  auto slots = manager_->Slots();
  EXPECT_EQ(slots[1].state, SlotView::State::kBusy);
  EXPECT_EQ(slots[1].job_id, first);
  EXPECT_EQ(slots[1].user, "alice");
  // Its ranks exit, but a process it left holds GPU 1.
  gpus_.procs[1] = {Proc(getpid(), 2048)};
  launcher_.Exit(first, 0, 0);
  launcher_.Exit(first, 1, 0);
  clock_.Advance(Millis(0));
  EXPECT_EQ(Get(first).state, JobState::kSucceeded);
  slots = manager_->Slots();
  EXPECT_EQ(slots[0].state, SlotView::State::kFree);
  EXPECT_EQ(slots[1].state, SlotView::State::kQuarantined);
  ASSERT_TRUE(slots[1].quarantine);
  EXPECT_EQ(slots[1].quarantine->holders.at(0).pid, getpid());

  const std::string second = Submit(2);
  EXPECT_EQ(Get(second).state, JobState::kPending);
  EXPECT_EQ(manager_->PendingReason(Get(second)),
            "needs 2 devices, 1 free; GPU 1 quarantined: pid " + std::to_string(getpid()) + " (" +
                ProcessUser(*ProcDir::Open(getpid())) + ") holds 2.0 GiB");
  const std::string small = Submit(1);  // would fit, but waits behind `second`
  EXPECT_EQ(Get(small).state, JobState::kPending);

  gpus_.procs[1].clear();
  clock_.Advance(Millis(2000));
  EXPECT_EQ(Get(second).state, JobState::kRunning);
  EXPECT_EQ(Get(second).cuda_visible_devices, "0,1");
  EXPECT_EQ(manager_->Slots()[1].state, SlotView::State::kBusy);
}

TEST_F(GpuManagerTest, RunningJobsGetTheirGpusUsage) {
  pool_.Start();
  const std::string id = Submit(1);
  clock_.Advance(Millis(10000));
  ASSERT_EQ(Get(id).table.gpu_usage.size(), 1u);
  EXPECT_EQ(Get(id).table.gpu_usage[0].gpu, "0");
  EXPECT_EQ(Get(id).table.gpu_usage[0].total_mib, 16384u);
}

}  // namespace
}  // namespace ltd::test
