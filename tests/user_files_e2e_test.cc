// --output/--error are opened, checked and written by a process that has
// become the job's user (lt-userio), never by root: a file a user's own
// rights reach but that acts on the kernel (a sysctl, a user namespace's
// uid_map, a sysfs or cgroup attribute) is refused in one line, and the
// file is left as it was. Root's rights were the way in: procfs checks
// a sysctl's writer by euid, and a uid_map write by the opener's
// CAP_SETUID, which a root thread with a changed fsuid still has.
#include <sched.h>
#include <sys/wait.h>

#include "security_fixture.h"

namespace ltd::test {
namespace {

class UserFiles : public Security {
 protected:
  // A submit of `-o path` as a_ is refused in one line that says `says`.
  void ExpectRefused(const std::string& path, const std::string& says) {
    const CmdResult r = CtlAs(
        *a_, {"submit", "-d", "--devices", "1", "--output", path, "--", child_, "argv", "0 0 1"});
    ExpectOneLineError(r, says);
    EXPECT_TRUE(Has(r.err, "--output " + path + " is on ")) << r.err;
  }
};

// A regular file of `fs_type` (mountinfo's name) under a mount of it.
std::string FileOn(const std::string& fs_type, const std::string& name) {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream after(line.substr(dash + 3));
    std::string type;
    after >> type;
    if (type != fs_type) continue;
    std::istringstream before(line.substr(0, dash));
    std::string id, parent, dev, root, point;
    before >> id >> parent >> dev >> root >> point;
    const std::string file = point + "/" + name;
    struct stat st {};
    if (stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return file;
  }
  return "";
}

TEST_F(UserFiles, ASysctlIsRefusedAndLeftAsItWas) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  const std::string before = ReadWhole("/proc/sys/kernel/domainname");
  ExpectRefused("/proc/sys/kernel/domainname",
                "is on procfs; give a file on an ordinary file system");
  // A name known only with the job's id: its directory is on procfs, so
  // it is refused at submit all the same.
  ExpectOneLineError(CtlAs(*a_, {"submit", "-d", "--devices", "1", "--output",
                                 "/proc/sys/kernel/%j", "--", child_, "argv", "pwned"}),
                     "is on procfs; give a file on an ordinary file system");
  EXPECT_EQ(ReadWhole("/proc/sys/kernel/domainname"), before);
}

// The user's own process in a fresh user namespace: its uid_map is theirs
// to write, and mapping uid 0 takes CAP_SETUID in the parent namespace,
// which the file's opener must hold. The user does not; root did.
TEST_F(UserFiles, TheUidMapOfTheUsersOwnNamespaceIsRefusedAndLeftEmpty) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  int ready[2], hold[2];
  ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(hold, O_CLOEXEC), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(ready[0]);
    close(hold[1]);
    const std::vector<gid_t> groups = a_->As().groups;
    if (setgroups(groups.size(), groups.data()) != 0 || setgid(a_->gid()) != 0 ||
        setuid(a_->uid()) != 0 || unshare(CLONE_NEWUSER) != 0) {
      _exit(3);
    }
    (void)!write(ready[1], "r", 1);
    char c;
    (void)!read(hold[0], &c, 1);  // until the test closes its end
    _exit(0);
  }
  close(ready[1]);
  close(hold[0]);
  char c = 0;
  const bool in_namespace = read(ready[0], &c, 1) == 1;
  close(ready[0]);
  const std::string map = "/proc/" + std::to_string(pid) + "/uid_map";
  if (in_namespace) {
    ASSERT_EQ(ReadWhole(map), "") << "a fresh namespace has no map yet";
    ExpectRefused(map, "is on procfs; give a file on an ordinary file system");
    EXPECT_EQ(ReadWhole(map), "") << "the namespace got a map";
  }
  close(hold[1]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(in_namespace) << "no user namespace for " << a_->name() << " (status " << status
                            << "): this kernel does not let users make one";
}

TEST_F(UserFiles, SysfsAndCgroupFilesAreRefused) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  const std::string sysfs = "/sys/kernel/mm/transparent_hugepage/enabled";
  struct stat st {};
  if (stat(sysfs.c_str(), &st) == 0) {
    const std::string before = ReadWhole(sysfs);
    ExpectRefused(sysfs, "is on sysfs; give a file on an ordinary file system");
    EXPECT_EQ(ReadWhole(sysfs), before);
  } else {
    ExpectRefused("/sys/kernel/uevent_seqnum", "is on sysfs");
  }
  // cgroup v1 or v2, whichever this machine has.
  std::string cgroup = FileOn("cgroup2", "cgroup.procs");
  const bool v2 = !cgroup.empty();
  if (!v2) cgroup = FileOn("cgroup", "cgroup.procs");
  ASSERT_FALSE(cgroup.empty()) << "no cgroup file system is mounted";
  ExpectRefused(cgroup, v2 ? "is on cgroup2fs" : "is on cgroupfs");
}

// What the user may write on an ordinary file system still works, written
// by a process of theirs (the file is theirs), and a file of another
// user's stays closed to them.
TEST_F(UserFiles, AnOrdinaryFileIsWrittenAsTheUser) {
  ASSERT_TRUE(StartLtd()) << d_.log();
  const std::string out = a_->home() + "/out.log";
  const std::string id =
      SubmitAs(*a_, {"--devices", "2", "--output", out, "--", child_, "argv", "hello"});
  ASSERT_EQ(d_.WaitEnded(id).value("state", ""), "SUCCEEDED");
  // The ranks share the file: each line whole, in whichever order they ran.
  const std::string text = ReadWhole(out);
  EXPECT_TRUE(text == "[0] hello\n[1] hello\n" || text == "[1] hello\n[0] hello\n") << text;
  struct stat st {};
  ASSERT_EQ(stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, a_->uid());
}

}  // namespace
}  // namespace ltd::test
