// A job opens only its GPUs, without a GPU: the test makes device nodes
// of its own with mknod (character major 195, minors 0-3 and 255, the
// numbers of /dev/nvidia0-3 and /dev/nvidiactl) and a job "given GPU 1".
// No driver answers here, so a node the job may open fails with ENXIO (the
// open reached the driver's major) and one it may not with EPERM (the
// cgroup refused it before any driver was asked).
//
//   Layouts.*   each layout this host offers, straight through the
//               containment module: a cgroup2 cgroup with the device
//               program attached (the eBPF path, run by the kernel) and a
//               v1 devices cgroup with its deny rules; a child joins the
//               cgroup and opens each node.
//   Isolation.* a real ltd (fake NVML, 4 GPUs, --gpus 1) runs a job that
//               opens the nodes; `gpus` and `show` say how GPUs are
//               isolated, or, with --gpu-isolation false, that they are not.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "cgroup_fs.h"
#include "cgroup_limits.h"
#include "file_io.h"
#include "gpu_devices.h"
#include "harness.h"

namespace ltd::test {
namespace {

constexpr int kMinors[] = {0, 1, 2, 3, 255};

// nvidiaN (nvidiactl for 255) in `dir`, as the driver's nodes.
::testing::AssertionResult MakeNodes(const std::string& dir) {
  for (int minor : kMinors) {
    const std::string path =
        dir + (minor == 255 ? "/nvidiactl" : "/nvidia" + std::to_string(minor));
    unlink(path.c_str());
    if (mknod(path.c_str(), S_IFCHR | 0666, makedev(kNvidiaMajor, minor)) != 0) {
      return ::testing::AssertionFailure() << "mknod " << path << ": " << std::strerror(errno);
    }
  }
  return ::testing::AssertionSuccess();
}

// A child joins `cgroups` (each one's cgroup.procs) and opens every node
// of `dir`; returns the errno of each open by minor (0: it opened).
std::map<int, int> OpenErrnosIn(const std::vector<std::string>& cgroups, const std::string& dir) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    for (const std::string& cg : cgroups) {
      const int fd = open((cg + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || write(fd, "0", 1) != 1) _exit(2);
      close(fd);
    }
    for (int minor : kMinors) {
      const std::string path =
          dir + (minor == 255 ? "/nvidiactl" : "/nvidia" + std::to_string(minor));
      const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
      int result[2] = {minor, fd >= 0 ? 0 : errno};
      if (fd >= 0) close(fd);
      if (write(fds[1], result, sizeof result) != sizeof result) _exit(3);
    }
    _exit(0);
  }
  close(fds[1]);
  std::map<int, int> out;
  int result[2];
  while (read(fds[0], result, sizeof result) == sizeof result) out[result[0]] = result[1];
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  return out;
}

class Layouts : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "cgroups and mknod need root";
    char tmpl[] = "/tmp/lt-gpu-nodes.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    nodes_ = tmpl;
    ASSERT_TRUE(MakeNodes(nodes_));
  }
  void TearDown() override {
    if (!cgroup_.empty()) {
      EXPECT_EQ(rmdir(cgroup_.c_str()), 0) << cgroup_ << std::strerror(errno);
    }
    if (!nodes_.empty()) std::filesystem::remove_all(nodes_);
  }
  // Given minor 1: the job's own GPU and nvidiactl reach the driver, every
  // other GPU is refused.
  void ExpectOnlyGpu1(const std::map<int, int>& errnos) {
    ASSERT_EQ(errnos.size(), std::size(kMinors));
    EXPECT_EQ(errnos.at(1), ENXIO) << std::strerror(errnos.at(1));
    EXPECT_EQ(errnos.at(255), ENXIO) << std::strerror(errnos.at(255));
    for (int other : {0, 2, 3}) EXPECT_EQ(errnos.at(other), EPERM) << "minor " << other;
  }
  std::string nodes_;
  std::string cgroup_;
};

// The kernel runs the program: a cgroup2 cgroup beside this test's own,
// which needs no controller (a device program attaches to any cgroup).
TEST_F(Layouts, V2DeviceProgramAllowsOnlyTheGivenMinor) {
  auto own = OwnCgroupDir();
  if (!own.ok()) GTEST_SKIP() << "no cgroup2 hierarchy: " << own.status().message();
  const ControllerPlace place = FindDevicePlace(*own, "", "");
  ASSERT_EQ(place.layout, CgroupLayout::kV2) << place.why.message();
  cgroup_ = *own + "/lt-gpu-test-" + std::to_string(getpid());
  ASSERT_TRUE(MakeCgroupDir(cgroup_).ok());
  // Before the program: every node reaches the driver.
  for (const auto& [minor, err] : OpenErrnosIn({cgroup_}, nodes_)) {
    EXPECT_EQ(err, ENXIO) << "minor " << minor;
  }
  absl::Status s = AttachGpuDeviceProgram(cgroup_, {1});
  ASSERT_TRUE(s.ok()) << s.message();
  ExpectOnlyGpu1(OpenErrnosIn({cgroup_}, nodes_));
  // A child cgroup (a rank's) is held by its parent's program too.
  const std::string rank = cgroup_ + "/rank-0";
  ASSERT_TRUE(MakeCgroupDir(rank).ok());
  ExpectOnlyGpu1(OpenErrnosIn({rank}, nodes_));
  EXPECT_EQ(rmdir(rank.c_str()), 0);
}

// An ltd SIGKILLed between its probe's mkdir and rmdir leaves the probe's
// cgroup: the next probe in that cgroup removes it, and only that one
// (not a living process's, not a name that holds no pid).
TEST_F(Layouts, AProbeLeftByAGoneProcessIsRemovedByTheNext) {
  auto own = OwnCgroupDir();
  if (!own.ok()) GTEST_SKIP() << "no cgroup2 hierarchy: " << own.status().message();
  cgroup_ = *own + "/lt-gpu-test-" + std::to_string(getpid());
  ASSERT_TRUE(MakeCgroupDir(cgroup_).ok());
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);
  const std::string left = cgroup_ + "/ltd-device-probe-" + std::to_string(gone);
  const std::string living = cgroup_ + "/ltd-device-probe-1";
  const std::string other = cgroup_ + "/ltd-device-probe-1x";
  for (const std::string& dir : {left, living, other}) ASSERT_TRUE(MakeCgroupDir(dir).ok()) << dir;

  const ControllerPlace place = FindDevicePlace(cgroup_, "", "");

  EXPECT_EQ(place.layout, CgroupLayout::kV2) << place.why.message();
  EXPECT_NE(access(left.c_str(), F_OK), 0) << left << " was left";
  EXPECT_EQ(access(living.c_str(), F_OK), 0) << living << " was removed";
  EXPECT_EQ(access(other.c_str(), F_OK), 0) << other << " was removed";
  for (const std::string& dir : {left, living, other}) rmdir(dir.c_str());
}

// A supervisor ltd started is in the cgroup where ltd attached a program:
// told so, it makes no cgroup and loads no program to find out again. A
// cgroup that does not exist shows it: a probe there fails.
TEST(DevicePlace, ProvenWhereThisProcessIsIsTakenWithoutAProbe) {
  const std::string nowhere = "/sys/fs/cgroup/ltd-no-such-cgroup-" + std::to_string(getpid());
  const ControllerPlace proven = FindDevicePlace(nowhere, "", "", nowhere);
  EXPECT_EQ(proven.layout, CgroupLayout::kV2);
  EXPECT_EQ(proven.own_dir, nowhere);
  // Proven elsewhere is no proof here: probed, and the probe fails.
  const ControllerPlace elsewhere = FindDevicePlace(nowhere, "", "", nowhere + "-other");
  EXPECT_EQ(elsewhere.layout, CgroupLayout::kNone);
  EXPECT_FALSE(elsewhere.why.ok());
  EXPECT_EQ(FindDevicePlace(nowhere, "", "").layout, CgroupLayout::kNone);
}

TEST_F(Layouts, V1DevicesDenyAllowsOnlyTheGivenMinor) {
  const std::string mountinfo = ReadWholeFile("/proc/self/mountinfo").value_or("");
  const std::string proc_cgroup = ReadWholeFile("/proc/self/cgroup").value_or("");
  const ControllerPlace place = FindDevicePlace("", mountinfo, proc_cgroup);
  if (place.layout != CgroupLayout::kV1) {
    GTEST_SKIP() << "no v1 devices hierarchy: " << place.why.message();
  }
  cgroup_ = place.own_dir + "/lt-gpu-test-" + std::to_string(getpid());
  ASSERT_TRUE(MakeCgroupDir(cgroup_).ok());
  absl::Status s = DenyOtherGpusV1(cgroup_, {1});
  ASSERT_TRUE(s.ok()) << s.message();
  ExpectOnlyGpu1(OpenErrnosIn({cgroup_}, nodes_));
}

TEST(NvidiaMinor, ParsesTheDriversInformationFile) {
  auto m = ParseNvidiaMinor(
      "Model: \t\t NVIDIA H200\nIRQ:   \t\t 255\nGPU UUID: \t GPU-x\nDevice Minor: \t 3\n");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(*m, 3u);
  EXPECT_FALSE(ParseNvidiaMinor("Device Minor: \t 255\n").ok());  // nvidiactl's, not a GPU's
  EXPECT_FALSE(ParseNvidiaMinor("Device Minor: \t x\n").ok());
  EXPECT_FALSE(ParseNvidiaMinor("").ok());
}

// ltd with 4 fake GPUs whose slot is GPU 1 only, so every job gets minor 1.
class Isolation : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "mknod needs root";
    nvml_ = d_.dir() + "/nvml";
    std::ofstream(nvml_) << "count 4\n";
    const std::string file = nvml_;
    d_.set_child_setup([file] { setenv("LT_FAKE_NVML_FILE", file.c_str(), 1); });
    nodes_ = d_.dir() + "/dev";
    ASSERT_EQ(mkdir(nodes_.c_str(), 0755), 0);
    ASSERT_TRUE(MakeNodes(nodes_));
  }
  void TearDown() override {
    d_.Stop();
    if (HasFailure()) std::fprintf(stderr, "---- ltd log ----\n%s\n", d_.log().c_str());
  }
  // A job that opens nvidia1 and nvidia2 and prints what each open said
  // (cat's strerror; the job's locale is the test's, C).
  std::string RunOpener() {
    const std::string script = "for m in 1 2; do cat " + nodes_ + "/nvidia$m; done 2>&1";
    CmdResult r = d_.Ctl({"submit", "-d", "--devices", "1", "--", "/bin/sh", "-c", script});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::string id = r.out;
    while (!id.empty() && id.back() == '\n') id.pop_back();
    d_.WaitEnded(id);
    return id;
  }
  Daemon d_;
  std::string nvml_;
  std::string nodes_;
};

TEST_F(Isolation, AJobOpensItsGpuAndNoOther) {
  ASSERT_TRUE(d_.Start({"--gpus", "1", "--nvml-library", LT_FAKE_NVML})) << d_.log();
  CmdResult gpus = d_.Ctl({"gpus"});
  EXPECT_NE(gpus.out.find("GPU isolation: isolated"), std::string::npos) << gpus.out;
  const std::string id = RunOpener();
  const std::string out = d_.Ctl({"logs", id}).out;
  // cat's words for the errno: ENXIO for its own GPU, EPERM for another's.
  EXPECT_NE(out.find("No such device or address"), std::string::npos) << out;
  EXPECT_NE(out.find("Operation not permitted"), std::string::npos) << out;
  const size_t nxio = out.find("nvidia1");
  const size_t perm = out.find("nvidia2");
  ASSERT_NE(nxio, std::string::npos) << out;
  ASSERT_NE(perm, std::string::npos) << out;
  EXPECT_NE(out.substr(nxio, out.find('\n', nxio) - nxio).find("No such device"), std::string::npos)
      << out;
  EXPECT_NE(out.substr(perm, out.find('\n', perm) - perm).find("not permitted"), std::string::npos)
      << out;
  EXPECT_NE(d_.Ctl({"show", id}).out.find("GPU access:    isolated"), std::string::npos);
}

TEST_F(Isolation, TurnedOffEveryJobOpensEveryGpuAndShowSaysSo) {
  ASSERT_TRUE(d_.Start({"--gpus", "1", "--nvml-library", LT_FAKE_NVML, "--gpu-isolation", "false"}))
      << d_.log();
  EXPECT_TRUE(WaitFor([&] { return d_.log().find("GPUs not isolated") != std::string::npos; }, 10s))
      << d_.log();
  CmdResult gpus = d_.Ctl({"gpus"});
  EXPECT_NE(gpus.out.find("GPU isolation: not isolated: turned off"), std::string::npos)
      << gpus.out;
  const std::string id = RunOpener();
  const std::string out = d_.Ctl({"logs", id}).out;
  EXPECT_EQ(out.find("not permitted"), std::string::npos) << out;
  EXPECT_NE(d_.Ctl({"show", id}).out.find("GPU access:    not isolated"), std::string::npos);
  EXPECT_EQ(d_.Show(id)["gpu_isolation"], "not isolated: turned off (gpu-isolation = false)");
}

}  // namespace
}  // namespace ltd::test
