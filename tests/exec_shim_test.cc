// lt-exec on its own: whom a rank becomes. The caller looks the user's
// groups up (LoginGroups) and hands them over with --groups, or on fd 6
// once its lookup answers (--groups-fd); lt-exec runs no NSS, so a caller
// of an older release that passes neither is refused, as is anything
// else on --groups, before the program runs.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "exec_shim_args.h"
#include "exec_spec.h"
#include "harness.h"
#include "spawn_attr.h"
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

// lt-exec ARGS, told to run lt_test_child CHILD_ARGS in "/"; with
// `groups_fd`, that fd is lt-exec's fd 6 (kGroupsFd).
ShimRun RunShim(const std::vector<std::string>& args, const std::vector<std::string>& child_args,
                const Fd* groups_fd = nullptr) {
  ShimRun run;
  std::vector<std::string> program = {TestChildPath()};
  program.insert(program.end(), child_args.begin(), child_args.end());
  auto spec = WriteExecSpec("/", program, {"PATH=/usr/bin:/bin"});
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return run;
  int out[2], control[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(control, O_CLOEXEC) != 0) return run;
  // Their write ends above the fds the spawn targets, as the launcher's.
  for (int* end : {&out[1], &control[1]}) {
    Fd fd(*end);
    EXPECT_TRUE(AboveSpawnFds(fd).ok());
    *end = fd.release();
  }
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
  if (groups_fd != nullptr) posix_spawn_file_actions_adddup2(&fa, groups_fd->get(), kGroupsFd);
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
  const std::vector<gid_t> groups = LoginGroups(user_->uid(), user_->gid()).value();
  EXPECT_EQ(Sorted(groups), Sorted({user_->gid(), extra_gid_}));
  // A uid without a passwd entry has its gid alone.
  EXPECT_EQ(LoginGroups(3999999, 3999998), std::vector<gid_t>{3999998});
}

TEST_F(ExecShimTest, TheRankGetsExactlyTheGroupsItIsGiven) {
  // As a supervisor calls it.
  std::vector<std::string> args;
  const std::vector<gid_t> groups = LoginGroups(user_->uid(), user_->gid()).value();
  AppendUserArgs(user_->uid(), user_->gid(), &groups, args);
  ShimRun looked_up = RunShim(args, {"ids,exit:0"});
  EXPECT_EQ(looked_up.status, 0) << looked_up.out << looked_up.control;
  EXPECT_EQ(looked_up.out, Ids(user_->uid(), user_->gid(), {user_->gid(), extra_gid_}));

  // Whatever the caller says, and nothing more: no lookup of its own.
  const std::string user = Cat(user_->uid(), ":", user_->gid());
  ShimRun given = RunShim({"--user", user, "--groups", "4242,4343"}, {"ids,exit:0"});
  EXPECT_EQ(given.status, 0) << given.out << given.control;
  EXPECT_EQ(given.out, Ids(user_->uid(), user_->gid(), {4242, 4343}));
}

// What its starter ignored and blocked does not reach the program: every
// signal at its default, none blocked (a rank that ignores SIGTERM from
// its start would outlive each teardown's grace). lt-exec resets only what
// the kernel lists as ignored; the ignore of a real-time signal too.
TEST_F(ExecShimTest, TheProgramStartsWithNoSignalIgnoredOrBlocked) {
  const int rt = SIGRTMIN + 5;
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  struct sigaction old_term {
  }, old_usr1{}, old_rt{};
  ASSERT_EQ(sigaction(SIGTERM, &ign, &old_term), 0);
  ASSERT_EQ(sigaction(SIGUSR1, &ign, &old_usr1), 0);
  ASSERT_EQ(sigaction(rt, &ign, &old_rt), 0);
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR2);
  sigaddset(&block, SIGHUP);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &block, &old_mask), 0);

  std::vector<std::string> args;
  const std::vector<gid_t> groups = {user_->gid()};
  AppendUserArgs(user_->uid(), user_->gid(), &groups, args);
  ShimRun as_user = RunShim(args, {"signals,exit:0"});
  ShimRun as_root = RunShim({}, {"signals,exit:0"});

  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGUSR1, &old_usr1, nullptr);
  sigaction(rt, &old_rt, nullptr);
  // glibc's own two real-time signals (32 and 33), which its posix_spawn
  // leaves ignored and its sigaction will not change, too.
  const std::string want = "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n";
  for (const ShimRun* run : {&as_user, &as_root}) {
    EXPECT_EQ(run->status, 0) << run->out << run->control;
    EXPECT_EQ(run->out, want);
  }
}

// A user may be in tens of thousands of groups (the kernel takes 65,536);
// one argument cannot hold them all (128 KiB), so they come in several.
TEST_F(ExecShimTest, TensOfThousandsOfGroupsAllArrive) {
  std::vector<gid_t> many;
  for (gid_t g = 100000; g < 130000; ++g) many.push_back(g);
  std::vector<std::string> args;
  AppendUserArgs(user_->uid(), user_->gid(), &many, args);
  EXPECT_GT(std::count(args.begin(), args.end(), "--groups"), 1);
  ShimRun r = RunShim(args, {"ids,exit:0"});
  EXPECT_EQ(r.status, 0) << r.control;
  EXPECT_EQ(r.out, Ids(user_->uid(), user_->gid(), many));

  // More than the kernel's limit, in all: refused, nothing runs.
  for (gid_t g = 130000; g < 165537; ++g) many.push_back(g);
  args.clear();
  AppendUserArgs(user_->uid(), user_->gid(), &many, args);
  ShimRun over = RunShim(args, {"ids,exit:0"});
  EXPECT_EQ(WIFEXITED(over.status) ? WEXITSTATUS(over.status) : -1, 126);
  EXPECT_EQ(over.control, "exec_failed more groups than the kernel takes\n");
  EXPECT_EQ(over.out.find("uid="), std::string::npos) << over.out;
}

// A spawn's source fd as low as its targets (free once the spawner closed
// one) would be overwritten by an earlier dup2: it is moved above them.
TEST(AboveSpawnFds, MovesAnFdAsLowAsASpawnTargetAboveThem) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  Fd rd(fcntl(p[0], F_DUPFD_CLOEXEC, 10)), wr(fcntl(p[1], F_DUPFD_CLOEXEC, 10));
  close(p[0]);
  close(p[1]);
  const int saved =
      fcntl(kHighestSpawnTarget, F_DUPFD_CLOEXEC, 10);  // whatever the process had there
  ASSERT_EQ(dup3(wr.get(), kHighestSpawnTarget, O_CLOEXEC), kHighestSpawnTarget);
  Fd low(kHighestSpawnTarget);
  ASSERT_TRUE(AboveSpawnFds(low).ok());
  EXPECT_GT(low.get(), kHighestSpawnTarget);
  EXPECT_EQ(fcntl(low.get(), F_GETFD), FD_CLOEXEC);
  EXPECT_EQ(write(low.get(), "x", 1), 1);  // the same pipe
  char c = 0;
  EXPECT_EQ(read(rd.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');
  if (saved >= 0) {
    ASSERT_EQ(dup3(saved, kHighestSpawnTarget, O_CLOEXEC), kHighestSpawnTarget);
    close(saved);
  } else {
    EXPECT_EQ(fcntl(kHighestSpawnTarget, F_GETFD), -1);  // AboveSpawnFds closed it
  }
  Fd high(fcntl(wr.get(), F_DUPFD_CLOEXEC, 10));
  const int was = high.get();
  ASSERT_TRUE(AboveSpawnFds(high).ok());
  EXPECT_EQ(high.get(), was);  // already above: left alone
}

// NSS that answers only when the test says so: an LDAP server away. Its
// lookups hold it, so a test that fails early leaves them blocked, not
// dangling.
class SlowNss : public std::enable_shared_from_this<SlowNss> {
 public:
  GroupsLookup::Lookup Lookup() {
    return [self = shared_from_this()](uid_t uid, gid_t gid) { return self->Answer(uid, gid); };
  }
  void ReleaseOne() {
    const std::lock_guard<std::mutex> lock(mu_);
    ++released_;
    cv_.notify_all();
  }
  int calls() {
    const std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  std::vector<gid_t> Answer(uid_t uid, gid_t gid) {
    std::unique_lock<std::mutex> lock(mu_);
    const int call = calls_++;
    cv_.wait(lock, [&] { return released_ > call; });
    return {gid, static_cast<gid_t>(uid), static_cast<gid_t>(1000 + call)};
  }

  std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0;
  int released_ = 0;
};

// A rank that starts before its supervisor's lookup has answered gets
// `--groups-fd 6` and waits there for the groups: they arrive, all of
// them, though written only once lt-exec runs.
TEST_F(ExecShimTest, GroupsThatComeLaterOnFd6AreTheRanksGroups) {
  auto nss = std::make_shared<SlowNss>();
  GroupsLookup lookup([nss](uid_t uid, gid_t gid) {
    (void)nss->Lookup()(uid, gid);  // held until released
    return LoginGroups(uid, gid);
  });
  auto given = lookup.GroupsForRank(user_->uid(), user_->gid());
  ASSERT_TRUE(given.ok()) << given.status();
  ASSERT_FALSE(given->groups.has_value());  // NSS has not answered
  ASSERT_TRUE(given->later.valid());
  Fd later = std::move(given->later);
  ASSERT_TRUE(AboveSpawnFds(later).ok());
  std::vector<std::string> args;
  AppendUserArgs(user_->uid(), user_->gid(), nullptr, args);
  EXPECT_EQ(args, (std::vector<std::string>{"--user", Cat(user_->uid(), ":", user_->gid()),
                                            "--groups-fd", "6"}));
  // NSS answers while lt-exec runs: before it reads fd 6 or while it waits there.
  std::thread release([nss] { nss->ReleaseOne(); });
  ShimRun r = RunShim(args, {"ids,exit:0"}, &later);
  release.join();
  EXPECT_EQ(r.status, 0) << r.out << r.control;
  EXPECT_EQ(r.out, Ids(user_->uid(), user_->gid(), {user_->gid(), extra_gid_}));
}

// A failed lookup writes nothing: the rank does not run, and says why.
TEST_F(ExecShimTest, NoGroupsOnFd6AndNoGroupsAtAllAreRefusedBeforeTheProgramRuns) {
  const std::string user = Cat(user_->uid(), ":", user_->gid());
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  Fd rd(p[0]), wr(p[1]);
  ASSERT_TRUE(AboveSpawnFds(rd).ok());
  wr.reset();  // the lookup failed: EOF, nothing written
  ShimRun failed = RunShim({"--user", user, "--groups-fd", "6"}, {"print:1,exit:0"}, &rd);
  EXPECT_EQ(WIFEXITED(failed.status) ? WEXITSTATUS(failed.status) : -1, 126);
  EXPECT_EQ(failed.control, Cat("exec_failed the supervisor could not look up the groups of uid ",
                                user_->uid(), "; see its log\n"));
  EXPECT_EQ(failed.out.find("line 0 of 1"), std::string::npos) << failed.out;

  // A supervisor of the release before --groups passed none and left NSS
  // to lt-exec, which runs none now.
  ShimRun none = RunShim({"--user", user}, {"print:1,exit:0"});
  EXPECT_EQ(WIFEXITED(none.status) ? WEXITSTATUS(none.status) : -1, 126);
  EXPECT_NE(none.control.find("--user needs --groups or --groups-fd"), std::string::npos)
      << none.control;
  EXPECT_EQ(none.out.find("line 0 of 1"), std::string::npos) << none.out;
}

TEST(GroupsLookup, AnswersOnlyOnceNssHasForThatUserAndTheLatestStart) {
  auto nss = std::make_shared<SlowNss>();
  GroupsLookup lookup(nss->Lookup());
  EXPECT_FALSE(lookup.Get(5, 6).has_value());  // nothing started
  lookup.Start(5, 6);
  EXPECT_FALSE(lookup.Get(5, 6).has_value());  // NSS has not answered: the caller goes on
  nss->ReleaseOne();
  ASSERT_TRUE(WaitFor([&] { return lookup.Get(5, 6).has_value(); }, std::chrono::seconds(10)));
  EXPECT_EQ(*lookup.Get(5, 6), (std::vector<gid_t>{6, 5, 1000}));
  EXPECT_FALSE(lookup.Get(5, 7).has_value());  // another user's groups are not these

  // A new attempt looks them up again; until then, no answer, not the old one.
  lookup.Start(5, 6);
  EXPECT_FALSE(lookup.Get(5, 6).has_value());
  // Attempts while NSS still has not answered wait for that lookup: no
  // thread more (the third call's answer would say 1002).
  lookup.Start(5, 6);
  lookup.Start(5, 6);
  nss->ReleaseOne();
  ASSERT_TRUE(WaitFor([&] { return lookup.Get(5, 6).has_value(); }, std::chrono::seconds(10)));
  EXPECT_EQ(*lookup.Get(5, 6), (std::vector<gid_t>{6, 5, 1001}));
  EXPECT_EQ(nss->calls(), 2);
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

// The groups as a rank waiting on `later` reads them: until the writer
// closes it.
std::string ReadAll(Fd& later) { return Drain(later.get()); }

TEST(GroupsLookup, RanksStartedBeforeNssAnswersGetTheGroupsOnTheirSocketsOnceItDoes) {
  auto nss = std::make_shared<SlowNss>();
  GroupsLookup lookup(nss->Lookup());
  lookup.Start(5, 6);
  auto first = lookup.GroupsForRank(5, 6);
  auto second = lookup.GroupsForRank(5, 6);
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE(first->later.valid() && second->later.valid());
  EXPECT_FALSE(first->groups || second->groups);
  nss->ReleaseOne();
  EXPECT_EQ(ReadAll(first->later), "6,5,1000");
  EXPECT_EQ(ReadAll(second->later), "6,5,1000");
  // Once answered, a rank gets them at once, with no socket.
  auto third = lookup.GroupsForRank(5, 6);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->later.valid());
  EXPECT_EQ(third->groups, (std::vector<gid_t>{6, 5, 1000}));
  EXPECT_EQ(nss->calls(), 1);
}

TEST(GroupsLookup, ALookupThatThrowsTellsTheWaitingRanksAndTheNextRankTriesAgain) {
  std::atomic<int> calls{0};
  std::mutex mu;
  mu.lock();  // the first lookup waits for the test
  GroupsLookup lookup([&](uid_t, gid_t gid) -> std::vector<gid_t> {
    if (calls++ == 0) {
      const std::lock_guard<std::mutex> held(mu);
      throw std::bad_alloc();
    }
    return {gid};
  });
  lookup.Start(5, 6);
  auto waiting = lookup.GroupsForRank(5, 6);
  ASSERT_TRUE(waiting.ok());
  ASSERT_TRUE(waiting->later.valid());
  mu.unlock();
  EXPECT_EQ(ReadAll(waiting->later), "");  // nothing: lt-exec refuses to run the rank
  // The next rank asks NSS again.
  auto next = lookup.GroupsForRank(5, 6);
  ASSERT_TRUE(next.ok()) << next.status();
  if (next->later.valid()) {
    EXPECT_EQ(ReadAll(next->later), "6");
  } else {
    EXPECT_EQ(next->groups, std::vector<gid_t>{6});
  }
  EXPECT_EQ(calls.load(), 2);
}

}  // namespace
// A job's own groups (its submitter's, in its record) are the ranks': no
// lookup runs for them, even one still waiting on NSS; and a lookup that
// answers none (lt-shim, which runs no NSS) refuses the rank in one line.
TEST(GroupsLookup, AJobsOwnGroupsNeedNoLookupAndNoneFoundRefusesTheRank) {
  auto nss = std::make_shared<SlowNss>();
  GroupsLookup lookup(nss->Lookup());
  lookup.Start(5, 6);  // held by NSS
  lookup.Set(5, 6, {6, 44});
  auto given = lookup.GroupsForRank(5, 6);
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->groups, (std::vector<gid_t>{6, 44}));
  EXPECT_FALSE(given->later.valid());
  nss->ReleaseOne();  // the forgotten lookup answers: nothing changes
  EXPECT_TRUE(WaitFor([&] { return nss->calls() == 1; }, std::chrono::seconds(10)));
  EXPECT_EQ(lookup.Get(5, 6), (std::vector<gid_t>{6, 44}));
  lookup.Set(5, 6, {});
  EXPECT_EQ(lookup.GroupsForRank(5, 6)->groups, std::vector<gid_t>{});

  // Held by the lookup's threads, which may outlive the test.
  auto calls = std::make_shared<std::atomic<int>>(0);
  GroupsLookup without_nss([calls](uid_t, gid_t) -> std::optional<std::vector<gid_t>> {
    ++*calls;
    return std::nullopt;
  });
  without_nss.Start(7, 8);
  ASSERT_TRUE(WaitFor([&] { return *calls == 1; }, std::chrono::seconds(10)));
  // Refused here, or (the retry still running) given a socket that ends
  // with nothing on it, which lt-exec refuses: never any groups.
  auto refused = without_nss.GroupsForRank(7, 8);
  if (refused.ok()) {
    EXPECT_FALSE(refused->groups.has_value());
    ASSERT_TRUE(refused->later.valid());
    pollfd p{refused->later.get(), POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 10'000), 1);
    char c;
    EXPECT_EQ(read(refused->later.get(), &c, 1), 0);
  } else {
    EXPECT_EQ(refused.status().message(),
              "cannot look up the groups of uid 7 (see the supervisor's log)");
  }
}

}  // namespace ltd::test
