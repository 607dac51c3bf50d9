// --mem and --cpus end to end through ltrun as root: the job's cgroups in
// the hierarchies that hold each controller on this host (v1 on a hybrid
// host, where these tests exercise the v1 path for real), an OOM kill
// reported as the root cause `oom`, and a refusal where no limit can be set.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cgroup_fs.h"
#include "cgroup_limits.h"
#include "e2e_fixture.h"
#include "file_io.h"
#include "harness.h"

namespace ltd::test {
namespace {

std::string LtrunPath() { return LtdPath().substr(0, LtdPath().rfind('/')) + "/ltrun"; }

// Where this process's limits go, as ltd finds them for itself.
LimitPlaces OwnLimitPlaces(const std::string& own) {
  return FindLimitPlaces(own, ReadWholeFile("/proc/self/mountinfo").value_or(""),
                         ReadWholeFile("/proc/self/cgroup").value_or(""));
}

class Limits : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for cgroup containment";
    auto own = OwnCgroupDir();
    if (!own.ok()) GTEST_SKIP() << "no cgroup v2 here: " << own.status().message();
    places_ = OwnLimitPlaces(*own);
    char tmpl[] = "/tmp/limits-test.XXXXXX";
    dir_ = mkdtemp(tmpl);
    marker_ = "LT_TEST_TAG=" + dir_;
  }
  void TearDown() override {
    if (dir_.empty()) return;
    EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(marker_).empty(); }, 5s));
    for (pid_t pid : ProcessesWithMarker(marker_)) kill(pid, SIGKILL);
    std::filesystem::remove_all(dir_);
  }
  CmdResult Ltrun(std::vector<std::string> args, const std::string& containment = "cgroup") {
    std::vector<std::string> argv = {LtrunPath(), "--containment", containment};
    argv.insert(argv.end(), args.begin(), args.end());
    // ltrun's own state dirs go in the test's, to be seen removed.
    return RunCommand(argv, {marker_, "TMPDIR=" + dir_}, 60s);
  }
  // What ltrun left in the test's dir of its own state dirs.
  std::vector<std::string> LtrunDirsLeft() {
    std::vector<std::string> left;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      if (e.path().filename().string().starts_with("ltrun.")) left.push_back(e.path());
    }
    return left;
  }
  nlohmann::json Report(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in, nullptr, false);
  }
  // The cgroup of this host's `controller` hierarchy that a rank reported
  // ("N:memory:/path" of its /proc/self/cgroup), as a dir; "" if none.
  std::string Reported(const std::string& out, const ControllerPlace& place,
                       const std::string& controller) {
    auto mount = ParseV1Mount(ReadWholeFile("/proc/self/mountinfo").value_or(""), controller);
    auto path = ParseV1Cgroup(out, controller);
    if (!mount.ok() || !path.ok()) return "";
    (void)place;
    return mount->mount_point + path->substr(mount->root == "/" ? 0 : mount->root.size());
  }
  LimitPlaces places_;
  std::string dir_, marker_;
};

TEST_F(Limits, EveryRankRunsInTheJobsCgroupsWithTheLimitsAndTheyAreRemovedAfter) {
  if (places_.memory.layout != CgroupLayout::kV1 || places_.cpu.layout != CgroupLayout::kV1) {
    GTEST_SKIP() << "this host's memory and cpu controllers are not v1 hierarchies";
  }
  // Each rank prints its cgroups, then its memory and cpu cgroups' limits
  // as the files say (the rank finds them by its own /proc/self/cgroup).
  auto mount = [](const char* c) {
    return ParseV1Mount(ReadWholeFile("/proc/self/mountinfo").value_or(""), c)->mount_point;
  };
  const std::string script =
      "cat /proc/self/cgroup; "
      "m=$(grep -E '^[0-9]+:([a-z_,]*,)?memory(,[a-z_,]*)?:' /proc/self/cgroup | cut -d: -f3); "
      "c=$(grep -E '^[0-9]+:([a-z_,]*,)?cpu(,[a-z_,]*)?:' /proc/self/cgroup | cut -d: -f3); "
      "echo mem=$(cat " +
      mount("memory") +
      "$m/memory.limit_in_bytes); "
      "echo quota=$(cat " +
      mount("cpu") + "$c/cpu.cfs_quota_us) period=$(cat " + mount("cpu") + "$c/cpu.cfs_period_us)";
  CmdResult r =
      Ltrun({"--devices", "2", "--mem", "64M", "--cpus", "0.5", "--", "/bin/sh", "-c", script});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("[0] mem=67108864"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1] mem=67108864"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[0] quota=50000 period=100000"), std::string::npos) << r.out;
  // The job's memory cgroup is below this process's own, in ltd's subtree,
  // and gone once ltrun is.
  std::string ranks_cgroups;
  for (size_t at = 0; (at = r.out.find("[0] ", at)) != std::string::npos; at += 4) {
    ranks_cgroups += r.out.substr(at + 4, r.out.find('\n', at) - at - 4) + "\n";
  }
  const std::string memory = Reported(ranks_cgroups, places_.memory, "memory");
  const std::string cpu = Reported(ranks_cgroups, places_.cpu, "cpu");
  EXPECT_TRUE(memory.starts_with(places_.memory.own_dir + "/ltd-")) << memory;
  EXPECT_NE(memory.find("/job-"), std::string::npos) << memory;
  EXPECT_TRUE(cpu.starts_with(places_.cpu.own_dir + "/ltd-")) << cpu;
  EXPECT_FALSE(std::filesystem::exists(memory)) << memory << " left behind";
  EXPECT_FALSE(std::filesystem::exists(cpu)) << cpu << " left behind";
  const std::string base = memory.substr(0, memory.find("/run-"));
  EXPECT_FALSE(std::filesystem::exists(base)) << base << " left behind";
}

TEST_F(Limits, AnOomKillIsTheRootCauseNamingTheRankAndTheLimit) {
  if (places_.memory.layout == CgroupLayout::kNone) GTEST_SKIP() << places_.memory.why.message();
  const std::string report = dir_ + "/report.json";
  CmdResult r = Ltrun({"--devices", "2", "--mem", "64M", "--report", report, "--", TestChildPath(),
                       "--rank", "1", "alloc:1024,hang", "hang"});
  EXPECT_EQ(r.exit_code, 137) << r.err;
  EXPECT_NE(r.err.find("rank 1 was killed by the OOM killer: the job's memory limit is 64M"),
            std::string::npos)
      << r.err;
  const auto j = Report(report);
  ASSERT_FALSE(j.is_discarded()) << "no report at " << report;
  EXPECT_EQ(j["state"], "OUT_OF_MEMORY");
  EXPECT_EQ(j["root_cause"]["reason"], "oom");
  EXPECT_EQ(j["root_cause"]["rank"], 1);
  EXPECT_EQ(j["root_cause"]["signal"], 9);
  EXPECT_EQ(j["root_cause"]["message"],
            "rank 1 was killed by the OOM killer: the job's memory limit is 64M");
}

TEST_F(Limits, ASigkillWithoutAnOomKillIsStillASignal) {
  if (places_.memory.layout == CgroupLayout::kNone) GTEST_SKIP() << places_.memory.why.message();
  const std::string report = dir_ + "/report.json";
  CmdResult r = Ltrun(
      {"--devices", "1", "--mem", "64M", "--report", report, "--", TestChildPath(), "signal:9"});
  EXPECT_EQ(r.exit_code, 137) << r.err;
  EXPECT_EQ(Report(report)["root_cause"]["reason"], "signaled");
}

TEST_F(Limits, WithoutCgroupsALimitIsRefusedInOneLine) {
  CmdResult r =
      Ltrun({"--devices", "1", "--mem", "64M", "--", TestChildPath(), "exit:0"}, "subreaper");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("ltrun: --mem cannot be had on this host: limits need cgroup containment"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  r = Ltrun({"--devices", "1", "--cpus", "lots", "--", TestChildPath(), "exit:0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("ltrun: --cpus 'lots' is not a number of CPUs; use e.g. 4 or 1.5"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(LtrunDirsLeft().empty()) << LtrunDirsLeft().front();
}

// Under ltd: the job's supervisor (lt-shim) sets them up the same way.
class LimitsUnderLtd : public E2E {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for cgroup containment";
    auto own = OwnCgroupDir();
    if (!own.ok()) GTEST_SKIP() << "no cgroup v2 here";
    if (OwnLimitPlaces(*own).memory.layout == CgroupLayout::kNone)
      GTEST_SKIP() << "no memory controller";
    E2E::SetUp();
  }
};

TEST_F(LimitsUnderLtd, ASubmittedJobIsLimitedAndItsOomKillIsTheRootCause) {
  const std::string id =
      SubmitDetached({"--devices", "2", "--mem", "64M", "--cpus", "1.5", "--", TestChildPath(),
                      "--rank", "1", "alloc:1024,hang", "hang"});
  nlohmann::json j = d_.WaitEnded(id, 30s);
  EXPECT_EQ(j["state"], "OUT_OF_MEMORY") << j.dump();
  EXPECT_EQ(j["exit_code"], 137);
  EXPECT_EQ(j["root_cause"]["reason"], "oom");
  EXPECT_EQ(j["root_cause"]["message"],
            "rank 1 was killed by the OOM killer: the job's memory limit is 64M");
  EXPECT_EQ(j["cpu_millis"], 1500);
  CmdResult show = d_.Ctl({"show", id});
  EXPECT_NE(show.out.find("memory 64M, 1.5 CPUs"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("rank 1 was killed by the OOM killer: the job's memory limit is 64M"),
            std::string::npos)
      << show.out;
  CmdResult bad =
      d_.Ctl({"submit", "--devices", "1", "--mem", "lots", "--", TestChildPath(), "exit:0"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("--mem 'lots' is not a size of at least 8M; use e.g. 1G"),
            std::string::npos)
      << bad.err;
}

}  // namespace
}  // namespace ltd::test
