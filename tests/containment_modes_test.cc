// Containment without a job: ltd refusing cgroup containment where no
// cgroup2 can be used, the pre-5.14 kill of a cgroup's processes, and a
// tree of cgroups killed and removed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "cgroup_fs.h"
#include "cgroup_test_util.h"
#include "harness.h"

namespace ltd::test {
namespace {

// Without a usable cgroup2 mount, `--containment cgroup` refuses to start
// with a one-line reason and `auto` falls back to the subreaper.
TEST(ContainmentModes, CgroupUnavailableFailsClearlyOrFallsBack) {
  if (getuid() != 0 || access("/usr/bin/unshare", X_OK) != 0) {
    GTEST_SKIP() << "needs root and unshare to hide the cgroup2 mount";
  }
  auto mountinfo = ReadWholeFile("/proc/self/mountinfo");
  ASSERT_TRUE(mountinfo.ok());
  auto mount = ParseCgroup2Mount(*mountinfo);
  if (!mount.ok()) GTEST_SKIP() << "no cgroup2 here to hide";
  Daemon d;
  const std::string hide = "umount -l " + mount->mount_point + " && exec \"$@\"";
  auto run = [&](const std::string& mode) {
    return RunCommand({"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
                       hide, "sh", LtdPath(), "--socket", d.socket(), "--state-dir", d.state_dir(),
                       "--devices", "1", "--containment", mode},
                      {}, 20s);
  };
  CmdResult forced = run("cgroup");
  EXPECT_EQ(forced.exit_code, 1);
  EXPECT_NE(forced.err.find("--containment cgroup: cgroups cannot be used here"), std::string::npos)
      << forced.err;
  EXPECT_EQ(std::count(forced.err.begin(), forced.err.end(), '\n'), 1) << forced.err;
}

// The pre-5.14 kill (freeze, SIGKILL each pid, thaw), run on a kernel
// that has cgroup.kill, so it is tested all the same.
TEST(CgroupFs, FreezeAndKillEmptiesACgroupWithEscapedProcesses) {
  if (!CgroupsWritable()) GTEST_SKIP() << "cgroup v2 is not writable here";
  auto own = OwnCgroupDir();
  ASSERT_TRUE(own.ok());
  const std::string dir = *own + "/lt-containment-test-" + std::to_string(getpid());
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0) << std::strerror(errno);
  // The orphaned grandchildren come to this process, which reaps them.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (!WriteWholeFile(dir + "/cgroup.procs", "0").ok()) _exit(1);
    setsid();
    for (int i = 0; i < 5; ++i) {
      if (fork() == 0) {
        if (fork() != 0) _exit(0);  // double fork: the grandchild is orphaned
        signal(SIGTERM, SIG_IGN);
        for (;;) pause();
      }
    }
    (void)!write(ready[1], "x", 1);
    for (;;) pause();
  }
  close(ready[1]);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  ASSERT_TRUE(WaitFor([&] { return CountCgroupProcs(dir) >= 6; }, 5s)) << CountCgroupProcs(dir);
  ASSERT_TRUE(CgroupPopulated(dir).value_or(false));

  ASSERT_TRUE(KillCgroupByFreezing(dir).ok());
  EXPECT_TRUE(WaitFor([&] { return !CgroupPopulated(dir).value_or(true); }, 5s));
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_FALSE(ReadWhole(dir + "/cgroup.events").find("frozen 1") != std::string::npos)
      << "left frozen";
  EXPECT_TRUE(RemoveCgroupTree(dir).ok());
  EXPECT_FALSE(Exists(dir));
  EXPECT_TRUE(WaitFor(ReapedAll, 5s)) << "an orphan was not killed";
  EXPECT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
}

// A tree of cgroups goes deepest first, a busy one stays and says so, and
// a kill reaches a cgroup through cgroup.kill; a cgroup not there is
// NotFound to both (a job's end that raced another remover).
TEST(CgroupFs, RemovesATreeKillsAndSaysWhatIsNotThere) {
  if (!CgroupsWritable()) GTEST_SKIP() << "cgroup v2 is not writable here";
  auto own = OwnCgroupDir();
  ASSERT_TRUE(own.ok());
  const std::string dir = *own + "/lt-tree-test-" + std::to_string(getpid());
  for (const std::string& d : {dir, dir + "/a", dir + "/a/b", dir + "/c"}) {
    ASSERT_EQ(mkdir(d.c_str(), 0755), 0) << d << ": " << std::strerror(errno);
  }
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (!WriteWholeFile(dir + "/a/b/cgroup.procs", "0").ok()) _exit(1);
    for (;;) pause();
  }
  ASSERT_TRUE(WaitFor([&] { return CountCgroupProcs(dir) == 1; }, 5s));
  absl::Status busy = RemoveCgroupTree(dir);
  EXPECT_FALSE(busy.ok());
  EXPECT_NE(busy.message().find(dir + "/a/b"), std::string::npos) << busy.message();
  EXPECT_TRUE(Exists(dir + "/a/b"));

  ASSERT_TRUE(KillCgroup(dir).ok());
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return !CgroupPopulated(dir).value_or(true); }, 5s));
  EXPECT_TRUE(RemoveCgroupTree(dir).ok());
  EXPECT_FALSE(Exists(dir));
  EXPECT_TRUE(RemoveCgroupTree(dir).ok()) << "a tree already gone is no error";
  EXPECT_TRUE(absl::IsNotFound(KillCgroup(dir)));
}

}  // namespace
}  // namespace ltd::test
