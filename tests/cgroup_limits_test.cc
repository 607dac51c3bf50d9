// Where memory and CPU limits go, in both cgroup layouts, on fake cgroup
// trees (plain files in a temp dir): the unified (v2) path cannot be had
// for real on a hybrid host, whose v2 mount offers no memory controller.
#include "cgroup_limits.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "file_io.h"
#include "job.h"
#include "job_limits.h"

namespace ltd {
namespace {

// A hybrid host as this project's CI machine is: v1 hierarchies of
// cpu, cpuacct, memory (co-mounted cpu,cpuacct on many distributions),
// and a v2 mount with only hugetlb.
constexpr std::string_view kHybridMountinfo =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
constexpr std::string_view kHybridCgroup =
    "9:name=systemd:/\n4:memory:/process_api/abc\n3:cpuset:/\n1:cpu,cpuacct:/batch\n0::/\n";

class FakeTree : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cgroup-limits-test.XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  // A fake cgroup: a dir with these files, empty unless given.
  std::string Cgroup(const std::string& rel,
                     std::vector<std::pair<std::string, std::string>> files) {
    const std::string dir = root_ + rel;
    std::filesystem::create_directories(dir);
    for (const auto& [name, text] : files) std::ofstream(dir + "/" + name) << text;
    return dir;
  }
  std::string Read(const std::string& path) { return ReadWholeFile(path).value_or("<none>"); }
  std::string root_;
};

TEST(CgroupLimits, FindsTheV1HierarchyOfEachController) {
  auto memory = ParseV1Mount(kHybridMountinfo, "memory");
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ(memory->mount_point, "/sys/fs/cgroup/memory");
  auto cpu = ParseV1Mount(kHybridMountinfo, "cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->mount_point, "/sys/fs/cgroup/cpu,cpuacct");  // not cpuset's
  EXPECT_FALSE(ParseV1Mount(kHybridMountinfo, "pids").ok());
  EXPECT_EQ(ParseV1Cgroup(kHybridCgroup, "memory").value_or(""), "/process_api/abc");
  EXPECT_EQ(ParseV1Cgroup(kHybridCgroup, "cpu").value_or(""), "/batch");
  EXPECT_FALSE(ParseV1Cgroup("0::/\n", "memory").ok());
}

TEST_F(FakeTree, AControllerTheV2CgroupOffersIsUsedThere) {
  const std::string own =
      Cgroup("/unified/ltd.service", {{"cgroup.controllers", "cpu memory pids\n"}});
  const ControllerPlace p = FindController("memory", own, kHybridMountinfo, kHybridCgroup);
  EXPECT_EQ(p.layout, CgroupLayout::kV2);
  EXPECT_EQ(p.own_dir, own);
}

TEST_F(FakeTree, OnAHybridHostTheV1HierarchyHoldsIt) {
  const std::string own = Cgroup("/unified", {{"cgroup.controllers", "hugetlb\n"}});
  const ControllerPlace memory = FindController("memory", own, kHybridMountinfo, kHybridCgroup);
  EXPECT_EQ(memory.layout, CgroupLayout::kV1);
  EXPECT_EQ(memory.own_dir, "/sys/fs/cgroup/memory/process_api/abc");
  const ControllerPlace cpu = FindController("cpu", own, kHybridMountinfo, kHybridCgroup);
  EXPECT_EQ(cpu.layout, CgroupLayout::kV1);
  EXPECT_EQ(cpu.own_dir, "/sys/fs/cgroup/cpu,cpuacct/batch");
}

TEST_F(FakeTree, WithoutEitherTheReasonIsOneLine) {
  const std::string own = Cgroup("/unified", {{"cgroup.controllers", "hugetlb\n"}});
  const ControllerPlace p =
      FindController("memory", own, "41 31 0:38 / /x rw - cgroup2 cgroup2 rw\n", "0::/\n");
  EXPECT_EQ(p.layout, CgroupLayout::kNone);
  const std::string why(p.why.message());
  EXPECT_NE(why.find("memory controller is not available"), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
}

TEST_F(FakeTree, V2EnablesTheControllerDownToTheJobAndSetsItsFiles) {
  const std::string own = Cgroup("/own", {{"cgroup.subtree_control", ""}});
  Cgroup("/own/ltd-t", {{"cgroup.subtree_control", "memory"}});
  Cgroup("/own/ltd-t/run-x", {{"cgroup.subtree_control", ""}});
  const std::string job = Cgroup("/own/ltd-t/run-x/job-1",
                                 {{"memory.max", ""},
                                  {"memory.swap.max", ""},
                                  {"cpu.max", ""},
                                  {"memory.events", "low 0\nhigh 0\nmax 4\noom 1\noom_kill 2\n"}});
  ASSERT_TRUE(EnableV2Controller(own, own + "/ltd-t/run-x", "memory").ok());
  EXPECT_EQ(Read(own + "/cgroup.subtree_control"), "+memory");
  EXPECT_EQ(Read(own + "/ltd-t/cgroup.subtree_control"), "memory");  // had it: untouched
  EXPECT_EQ(Read(own + "/ltd-t/run-x/cgroup.subtree_control"), "+memory");
  EXPECT_FALSE(EnableV2Controller(own + "/ltd-t", own, "memory").ok());  // not below

  ASSERT_TRUE(SetMemoryLimit(CgroupLayout::kV2, job, 100u << 20).ok());
  EXPECT_EQ(Read(job + "/memory.max"), "104857600");
  EXPECT_EQ(Read(job + "/memory.swap.max"), "0");
  ASSERT_TRUE(SetCpuLimit(CgroupLayout::kV2, job, 1500).ok());
  EXPECT_EQ(Read(job + "/cpu.max"), "150000 100000");
  EXPECT_EQ(ReadOomKills(CgroupLayout::kV2, job), 2u);
}

TEST_F(FakeTree, V1SetsTheHierarchysOwnFiles) {
  const std::string mem = Cgroup(
      "/memory/job-1", {{"memory.limit_in_bytes", ""},
                        {"memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"}});
  const std::string cpu =
      Cgroup("/cpu/job-1", {{"cpu.cfs_period_us", ""}, {"cpu.cfs_quota_us", ""}});
  ASSERT_TRUE(SetMemoryLimit(CgroupLayout::kV1, mem, 64u << 20).ok());
  EXPECT_EQ(Read(mem + "/memory.limit_in_bytes"), "67108864");
  ASSERT_TRUE(SetCpuLimit(CgroupLayout::kV1, cpu, 250).ok());
  EXPECT_EQ(Read(cpu + "/cpu.cfs_period_us"), "100000");
  EXPECT_EQ(Read(cpu + "/cpu.cfs_quota_us"), "25000");
  EXPECT_EQ(ReadOomKills(CgroupLayout::kV1, mem), 1u);
  EXPECT_EQ(ReadOomKills(CgroupLayout::kNone, mem), std::nullopt);
  EXPECT_FALSE(SetMemoryLimit(CgroupLayout::kNone, mem, 1).ok());
}

TEST(CgroupLimits, CpusAreReadAsThousandths) {
  EXPECT_EQ(ParseCpus("2"), 2000u);
  EXPECT_EQ(ParseCpus("1.5"), 1500u);
  EXPECT_EQ(ParseCpus("0.25"), 250u);
  EXPECT_EQ(ParseCpus(".5"), 500u);
  for (const char* bad : {"", "0", "0.0", "1.2345", "-1", "1e3", "2 ", "x", "."}) {
    EXPECT_EQ(ParseCpus(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(FormatCpus(1500), "1.5");
  EXPECT_EQ(FormatCpus(2000), "2");
  EXPECT_EQ(FormatCpus(250), "0.25");
}

JobSpec LimitedSpec() {
  JobSpec spec;
  spec.argv = {"/bin/true"};
  spec.cwd = "/";
  spec.limits.memory_bytes = 100u << 20;
  spec.limits.cpu_millis = 1500;
  return spec;
}

TEST(CgroupLimits, ASubmitWhoseLimitCannotBeSetIsRefusedWithTheReason) {
  SpecLimits here;
  here.slots = 4;
  here.cpus = 2;
  EXPECT_TRUE(ValidateSpec(LimitedSpec(), here).ok());
  here.no_memory_limit = "the cgroup memory controller is not available";
  absl::Status s = ValidateSpec(LimitedSpec(), here);
  EXPECT_EQ(s.message(),
            "--mem cannot be had on this host: the cgroup memory controller is not available");
  here.no_memory_limit.clear();
  here.no_cpu_limit = "limits need cgroup containment";
  EXPECT_EQ(ValidateSpec(LimitedSpec(), here).message(),
            "--cpus cannot be had on this host: limits need cgroup containment");
  here.no_cpu_limit.clear();
  JobSpec spec = LimitedSpec();
  spec.limits.cpu_millis = 3000;
  EXPECT_EQ(ValidateSpec(spec, here).message(),
            "--cpus 3 is more than the 2 CPUs of this host; ask for at most 2");
  spec = LimitedSpec();
  spec.limits.memory_bytes = 4096;
  EXPECT_FALSE(ValidateSpec(spec, here).ok());
  spec = LimitedSpec();
  spec.limits.memory_per_rank_bytes = 200u << 20;
  EXPECT_FALSE(ValidateSpec(spec, here).ok());
}

TEST(CgroupLimits, TheRecordKeepsTheLimits) {
  Job job;
  job.id = "7";
  job.spec = LimitedSpec();
  job.spec.limits.memory_per_rank_bytes = 50u << 20;
  auto back = JobFromJson(ToJson(job));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->spec.limits, job.spec.limits);
}

}  // namespace
}  // namespace ltd
