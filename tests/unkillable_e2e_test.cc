// Ranks that do not die of SIGKILL, end to end: one rank frozen by the
// cgroup v1 freezer (a frozen task ignores SIGKILL until thawed), which
// stands in for a process in the kernel's uninterruptible sleep (a driver,
// NFS). The job still reaches its final record with its real root cause
// and the frozen rank listed; its devices stay out of use until it is
// gone; the admin's --unkillable-program runs. The test thaws and removes
// every cgroup it makes.
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cgroup_fs.h"
#include "cgroup_limits.h"
#include "e2e_fixture.h"
#include "file_io.h"
#include "freezer.h"
#include "harness.h"

namespace ltd::test {
namespace {

class Unkillable : public E2E {
 protected:
  std::vector<std::string> DaemonArgs() override {
    program_out_ = d_.dir() + "/unkillable.out";
    program_ = d_.dir() + "/unkillable.sh";
    std::ofstream(program_) << "#!/bin/sh\nenv | grep '^LTD_' | sort > " << program_out_ << "\n";
    chmod(program_.c_str(), 0755);
    return {"--devices", "2", "--unkillable-program", program_, "--unkillable-program-timeout",
            "10s"};
  }
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for the freezer";
    E2E::SetUp();
  }
  std::string program_, program_out_;
};

TEST_F(Unkillable, AFrozenRankIsListedItsDevicesHeldUntilItIsGoneAndTheProgramRuns) {
  Freezer freezer;
  if (!freezer.ok()) GTEST_SKIP() << "no cgroup v1 freezer here";
  const std::string pidfile = d_.dir() + "/rank1.pid";
  const std::string go = d_.dir() + "/go";
  const std::string id =
      SubmitDetached({"--devices", "2", "--grace", "1s", "--", TestChildPath(), "--rank", "1",
                      "pidfile:" + pidfile + ",hang", "waitfile:" + go + ",exit:3"});
  std::string text;
  ASSERT_TRUE(WaitFor([&] { return !(text = ReadWholeFile(pidfile).value_or("")).empty(); }, 20s));
  const pid_t pid = static_cast<pid_t>(std::stol(text));
  // Where the rank's cgroup is, to see it removed once the rank is gone.
  std::string cgroup;
  {
    auto own = OwnCgroupDir();
    auto rel =
        ParseUnifiedCgroup(ReadWholeFile("/proc/" + std::to_string(pid) + "/cgroup").value_or(""));
    ASSERT_TRUE(own.ok() && rel.ok());
    auto mount = ParseCgroup2Mount(ReadWholeFile("/proc/self/mountinfo").value_or(""));
    ASSERT_TRUE(mount.ok());
    cgroup = mount->mount_point + *rel;
  }
  ASSERT_TRUE(freezer.Freeze(pid));
  std::ofstream(go) << "";

  // Rank 0's exit is the root cause; rank 1 ignores SIGTERM and SIGKILL.
  nlohmann::json j = d_.WaitEnded(id, 30s);
  EXPECT_EQ(j["state"], "FAILED") << j.dump();
  EXPECT_EQ(j["root_cause"]["rank"], 0);
  EXPECT_EQ(j["root_cause"]["reason"], "exited");
  ASSERT_EQ(j["unkillable"].size(), 1u) << j.dump();
  EXPECT_EQ(j["unkillable"][0]["rank"], 1);
  EXPECT_EQ(j["unkillable"][0]["pid"], pid);
  CmdResult show = d_.Ctl({"show", id});
  EXPECT_NE(show.out.find("unkillable: rank 1 pid " + std::to_string(pid) + " in "),
            std::string::npos)
      << show.out;

  // Its devices stay out of use: a job that needs one waits.
  const std::string next = SubmitDetached({"--devices", "1", "--", TestChildPath(), "exit:0"});
  CmdResult gpus = d_.Ctl({"gpus"});
  EXPECT_NE(gpus.out.find("QUARANTINED"), std::string::npos) << gpus.out;
  // Which process holds them, where it sleeps in the kernel, since when.
  EXPECT_NE(gpus.out.find("rank 1 pid " + std::to_string(pid) + " in "), std::string::npos)
      << gpus.out;
  EXPECT_NE(gpus.out.find(", since 2"), std::string::npos) << gpus.out;
  const nlohmann::json slots =
      nlohmann::json::parse(d_.Ctl({"--json", "gpus"}).out, nullptr, false);
  bool listed = false;
  ASSERT_TRUE(slots.is_object()) << "gpus --json printed no object";
  for (const auto& slot : slots.value("slots", nlohmann::json::array())) {
    for (const auto& u : slot.value("unkillable", nlohmann::json::array())) {
      const bool where = !u.value("wchan", "").empty() || !u.value("stack", "").empty();
      if (u.value("pid", 0) == pid && where) listed = true;
    }
  }
  EXPECT_TRUE(listed) << "no slot names pid " << pid << " and where it sleeps";
  EXPECT_NE(show.out.find(", since 2"), std::string::npos) << show.out;
  EXPECT_EQ(d_.Show(next)["state"], "PENDING");
  // The admin's program ran, told which job and which process.
  ASSERT_TRUE(WaitFor([&] { return !ReadWholeFile(program_out_).value_or("").empty(); }, 10s));
  const std::string env = ReadWholeFile(program_out_).value_or("");
  EXPECT_NE(env.find("LTD_JOB_ID=" + id + "\n"), std::string::npos) << env;
  EXPECT_NE(env.find("LTD_UNKILLABLE_PIDS=" + std::to_string(pid) + "\n"), std::string::npos)
      << env;

  // Thawed, it dies of its pending SIGKILL: ltd sees it go, its devices
  // come back (the waiting job runs), and its cgroup is removed.
  freezer.Thaw();
  EXPECT_EQ(d_.WaitEnded(next, 30s)["state"], "SUCCEEDED");
  EXPECT_TRUE(WaitFor([&] { return !std::filesystem::exists(cgroup); }, 10s)) << cgroup;
  EXPECT_NE(d_.log().find("pid=" + std::to_string(pid) + " that would not die is gone"),
            std::string::npos);
  nlohmann::json after = d_.Show(id);
  EXPECT_FALSE(after["unkillable"][0]["gone_at"].is_null()) << after.dump();
}

}  // namespace
}  // namespace ltd::test
