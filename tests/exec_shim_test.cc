// lt-exec on its own: whom a rank becomes. The caller looks the user's
// groups up (LoginGroups) and hands them over with --groups; a caller of
// an older release passes none and lt-exec looks them up itself; anything
// else on --groups is refused before the program runs.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "exec_shim_args.h"
#include "exec_spec.h"
#include "harness.h"
#include "str_util.h"

namespace ltd::test {
namespace {

struct ShimRun {
  int status = -1;
  std::string out;      // stdout and stderr
  std::string control;  // fd 3: where lt-exec says why it failed
};

std::string Drain(int fd) {
  std::string s;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) s.append(buf, static_cast<size_t>(n));
  return s;
}

// lt-exec ARGS, told to run lt_test_child CHILD_ARGS in "/".
ShimRun RunShim(const std::vector<std::string>& args, const std::vector<std::string>& child_args) {
  ShimRun run;
  std::vector<std::string> program = {TestChildPath()};
  program.insert(program.end(), child_args.begin(), child_args.end());
  auto spec = WriteExecSpec("/", program, {"PATH=/usr/bin:/bin"});
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return run;
  int out[2], control[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(control, O_CLOEXEC) != 0) return run;
  std::vector<std::string> argv = {LT_EXEC_SHIM};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv = CStrings(argv);
  char* no_env[] = {nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, out[1], 2);
  posix_spawn_file_actions_adddup2(&fa, control[1], 3);
  posix_spawn_file_actions_adddup2(&fa, spec->get(), kExecSpecFd);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), no_env);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  close(control[1]);
  if (rc == 0) {
    run.out = Drain(out[0]);  // EOF: lt-exec and the program are done with it
    run.control = Drain(control[0]);
    waitpid(pid, &run.status, 0);
  }
  close(out[0]);
  close(control[0]);
  return run;
}

std::vector<gid_t> Sorted(std::vector<gid_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// "uid=U gid=G groups=A,B" as lt_test_child's `ids` prints it.
std::string Ids(uid_t uid, gid_t gid, const std::vector<gid_t>& groups) {
  std::ostringstream s;
  s << "uid=" << uid << " gid=" << gid << " groups=";
  bool first = true;
  for (gid_t g : Sorted(groups)) {
    s << (first ? "" : ",") << g;
    first = false;
  }
  s << "\n";
  return s.str();
}

class ExecShimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "lt-exec changes users only as root";
    if (access("/usr/sbin/useradd", X_OK) != 0 || access("/usr/sbin/groupadd", X_OK) != 0)
      GTEST_SKIP() << "useradd/groupadd (package passwd) are not installed";
    group_ = "ltx" + std::to_string(getpid()) + "g";
    if (getgrnam(group_.c_str()) != nullptr) RunCommand({"/usr/sbin/groupdel", group_}, {}, 30s);
    ASSERT_EQ(RunCommand({"/usr/sbin/groupadd", group_}, {}, 60s).exit_code, 0);
    const group* g = getgrnam(group_.c_str());
    ASSERT_NE(g, nullptr);
    extra_gid_ = g->gr_gid;
    user_ = std::make_unique<TestUser>("ltx" + std::to_string(getpid()),
                                       std::vector<std::string>{group_});
    ASSERT_TRUE(user_->ok()) << user_->error();
  }
  void TearDown() override {
    user_.reset();
    if (!group_.empty()) RunCommand({"/usr/sbin/groupdel", group_}, {}, 30s);
  }

  std::string group_;
  gid_t extra_gid_ = 0;
  std::unique_ptr<TestUser> user_;
};

TEST_F(ExecShimTest, LoginGroupsAreTheUsersGroupsAsInitgroupsSetsThem) {
  const std::vector<gid_t> groups = LoginGroups(user_->uid(), user_->gid());
  EXPECT_EQ(Sorted(groups), Sorted({user_->gid(), extra_gid_}));
  // A uid without a passwd entry has its gid alone.
  EXPECT_EQ(LoginGroups(3999999, 3999998), std::vector<gid_t>{3999998});
}

TEST_F(ExecShimTest, TheRankGetsExactlyTheGroupsItIsGiven) {
  // As a supervisor calls it.
  std::vector<std::string> args;
  AppendUserArgs(user_->uid(), user_->gid(), LoginGroups(user_->uid(), user_->gid()), args);
  ShimRun looked_up = RunShim(args, {"ids,exit:0"});
  EXPECT_EQ(looked_up.status, 0) << looked_up.out << looked_up.control;
  EXPECT_EQ(looked_up.out, Ids(user_->uid(), user_->gid(), {user_->gid(), extra_gid_}));

  // Whatever the caller says, and nothing more: no lookup of its own.
  const std::string user = Cat(user_->uid(), ":", user_->gid());
  ShimRun given = RunShim({"--user", user, "--groups", "4242,4343"}, {"ids,exit:0"});
  EXPECT_EQ(given.status, 0) << given.out << given.control;
  EXPECT_EQ(given.out, Ids(user_->uid(), user_->gid(), {4242, 4343}));
}

// A user may be in tens of thousands of groups (the kernel takes 65,536);
// one argument cannot hold them all (128 KiB), so they come in several.
TEST_F(ExecShimTest, TensOfThousandsOfGroupsAllArrive) {
  std::vector<gid_t> many;
  for (gid_t g = 100000; g < 130000; ++g) many.push_back(g);
  std::vector<std::string> args;
  AppendUserArgs(user_->uid(), user_->gid(), many, args);
  EXPECT_GT(std::count(args.begin(), args.end(), "--groups"), 1);
  ShimRun r = RunShim(args, {"ids,exit:0"});
  EXPECT_EQ(r.status, 0) << r.control;
  EXPECT_EQ(r.out, Ids(user_->uid(), user_->gid(), many));

  // More than the kernel's limit, in all: refused, nothing runs.
  for (gid_t g = 130000; g < 165537; ++g) many.push_back(g);
  args.clear();
  AppendUserArgs(user_->uid(), user_->gid(), many, args);
  ShimRun over = RunShim(args, {"ids,exit:0"});
  EXPECT_EQ(WIFEXITED(over.status) ? WEXITSTATUS(over.status) : -1, 126);
  EXPECT_EQ(over.control, "exec_failed more groups than the kernel takes\n");
  EXPECT_EQ(over.out.find("uid="), std::string::npos) << over.out;
}

// A supervisor started by an older ltd passes no --groups: lt-exec looks
// the groups up itself, so its ranks keep their supplementary groups.
TEST_F(ExecShimTest, WithoutGroupsLtExecLooksThemUpItself) {
  ShimRun r = RunShim({"--user", Cat(user_->uid(), ":", user_->gid())}, {"ids,exit:0"});
  EXPECT_EQ(r.status, 0) << r.out << r.control;
  EXPECT_EQ(r.out, Ids(user_->uid(), user_->gid(), {user_->gid(), extra_gid_}));
}

TEST_F(ExecShimTest, GarbledGroupsAreRefusedBeforeTheProgramRuns) {
  const std::string user = Cat(user_->uid(), ":", user_->gid());
  for (const char* bad : {"", ",", "1,", ",1", "1,,2", "-1", " 1", "+1", "x", "1x", "4294967295",
                          "99999999999999999999"}) {
    ShimRun r = RunShim({"--user", user, "--groups", bad}, {"print:1,exit:0"});
    ASSERT_TRUE(WIFEXITED(r.status)) << bad;
    EXPECT_EQ(WEXITSTATUS(r.status), 126) << "--groups '" << bad << "'";
    EXPECT_EQ(r.control, "exec_failed --groups takes GID,GID,...\n") << bad;
    EXPECT_EQ(r.out.find("line 0 of 1"), std::string::npos)
        << "the program ran with --groups '" << bad << "': " << r.out;
  }
}

}  // namespace
}  // namespace ltd::test
