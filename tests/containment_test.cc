// Containment end to end: a real ltd in each containment mode (cgroup and
// the subreaper fallback) running ranks that escape, ignore SIGTERM, stop,
// fork hundreds of children or outlive ltd itself. After each job: no
// process of it left anywhere in /proc, no zombie, ltd's fd count where it
// was, and (cgroup mode) no cgroup of it left.
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cgroup_fs.h"
#include "cgroup_test_util.h"
#include "e2e_fixture.h"
#include "process_scan.h"

namespace ltd::test {
namespace {

const std::string kChild = TestChildPath();

std::vector<pid_t> ReadPids(const std::string& path) {
  std::vector<pid_t> pids;
  std::ifstream in(path);
  for (long pid; in >> pid;) pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

// The cgroup v2 directory a process is in, or "" when it is gone.
std::string CgroupOf(pid_t pid) {
  auto text = ReadWholeFile("/proc/" + std::to_string(pid) + "/cgroup");
  if (!text.ok()) return "";
  auto path = ParseUnifiedCgroup(*text);
  auto mountinfo = ReadWholeFile("/proc/self/mountinfo");
  auto mount = mountinfo.ok() ? ParseCgroup2Mount(*mountinfo) : absl::StatusOr<Cgroup2Mount>();
  if (!path.ok() || !mount.ok()) return "";
  return mount->mount_point + (*path == "/" ? "" : *path);
}

pid_t SessionOf(pid_t pid) { return getsid(pid); }

// Reaps every exited child of this process; true once none is a zombie.
bool NoZombieChildren() {
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  return ZombieChildrenOf(getpid()).empty();
}

class Containment : public E2E, public ::testing::WithParamInterface<std::string> {
 protected:
  std::vector<std::string> DaemonArgs() override { return {"--containment", GetParam()}; }

  void SetUp() override {
    if (GetParam() == "cgroup" && !CgroupsWritable()) {
      GTEST_SKIP() << "cgroup v2 is not writable here; only the subreaper fallback is tested";
    }
    E2E::SetUp();
    if (HasFatalFailure()) return;
    // libuv opens /dev/null once, on the first spawn, and keeps it; gRPC
    // sets up its pollers on the first call. Count fds after both. (The
    // socket answers before ltd is fully up; a job's answer means it is.)
    ASSERT_EQ(d_.Ctl({"submit", "--devices", "1", "--", "/bin/true"}).exit_code, 0);
    // That job took the spare supervisor; ltd starts the next a moment
    // later, and holds fds for it from then on: the baseline counts them.
    // (Its supervisor, free again, may wait as a second spare.)
    ASSERT_TRUE(WaitFor(
        [&] {
          const std::vector<pid_t> spares = SpareSupervisors(d_.state_dir());
          return !spares.empty() && std::all_of(spares.begin(), spares.end(), [&](pid_t p) {
            return IsReadySpare(d_.state_dir(), p);
          });
        },
        10s))
        << "ltd keeps no spare supervisor\n"
        << d_.log();
    baseline_fds_ = LtdFds();
    run_dir_ = RunDir();
    if (GetParam() == "cgroup") {
      ASSERT_TRUE(Exists(run_dir_)) << "'" << run_dir_ << "'";
    }
  }

  void TearDown() override {
    E2E::TearDown();
    // ltd removes its subtree when it stops, each supervisor its job's.
    if (GetParam() == "cgroup" && !run_dir_.empty()) {
      EXPECT_TRUE(WaitFor([&] { return !Exists(run_dir_); }, 5s)) << run_dir_ << " left behind";
      EXPECT_TRUE(WaitFor([&] { return !Exists(Base()); }, 5s)) << Base() << " left behind";
    }
  }

  // The current ltd's own run cgroup, as it logged it at start ("" outside
  // cgroup mode). Each supervisor logs its own after it, as
  // "lt-shim[PID] containment: ...", which this skips; after a restart the
  // log holds both ltds' lines, and the latest is the current one's.
  std::string RunDir() const {
    const std::string log = d_.log();
    const std::string key = "info containment: cgroup, jobs under ";
    const size_t at = log.rfind(key);
    if (at == std::string::npos) return "";
    const size_t end = log.find('\n', at);
    return log.substr(at + key.size(), end - at - key.size());
  }
  // <own cgroup>/ltd-<state tag>: every instance's run-* is in it.
  std::string Base() const { return run_dir_.substr(0, run_dir_.rfind('/')); }
  // The cgroup of job `id`'s supervisor; the job's is job-<ID> in it.
  std::string JobCgroup(const std::string& id) const { return Base() + "/run-job" + id; }

  // Zombies under ltd or under any supervisor of this test's state dir.
  size_t Zombies() const {
    size_t n = ZombieChildrenOf(d_.pid()).size();
    for (pid_t shim : Supervisors(d_.state_dir())) n += ZombieChildrenOf(shim).size();
    return n;
  }

  std::string Submit(std::vector<std::string> args) { return SubmitDetached(std::move(args)); }

  // ltd's fds but the two it holds for each spare supervisor (its socket
  // and pidfd): a supervisor free of its job waits as one more spare.
  int LtdFds() const {
    return CountOpenFds(d_.pid()) - 2 * static_cast<int>(SpareSupervisors(d_.state_dir()).size());
  }

  // Every promise of teardown, checked the moment the job is reported
  // ended: ltd reports that only once nothing of the job is left.
  nlohmann::json ExpectEndedClean(const std::string& id, std::chrono::milliseconds timeout = 30s) {
    nlohmann::json job = d_.WaitEnded(id, timeout);
    const std::string state = job.value("state", "");
    EXPECT_TRUE(state != "RUNNING" && state != "PENDING" && !state.empty()) << job.dump();
    const std::vector<pid_t> left = ProcessesWithMarker(d_.marker());
    EXPECT_TRUE(left.empty()) << left.size() << " process(es) of the job alive, first pid "
                              << left.front();
    EXPECT_EQ(job.value("containment", ""), GetParam());
    // Orphans are the supervisor's children (in subreaper mode it is
    // their subreaper) and it reaps them; ltd reaps its supervisors.
    EXPECT_TRUE(WaitFor([&] { return Zombies() == 0; }, 5s))
        << Zombies() << " zombie(s) under ltd or a supervisor";
    EXPECT_TRUE(ZombieChildrenOf(getpid()).empty());
    // Back to the baseline or below: the baseline may still count the
    // warm-up client's connection, which ltd closes a moment later, so only
    // a count above it is a leak.
    EXPECT_TRUE(WaitFor([&] { return LtdFds() <= baseline_fds_; }, 5s))
        << "ltd has " << LtdFds() << " fds besides its spares', had " << baseline_fds_;
    if (GetParam() == "cgroup") {
      EXPECT_TRUE(WaitFor([&] { return !Exists(JobCgroup(id)); }, 5s))
          << JobCgroup(id) << " left behind";
    }
    return job;
  }

  // SIGKILLed processes finish dying on their own time: one still in its
  // exit path (its memory, hence its marker, already gone) is not alive.
  void ExpectAllDead(const std::vector<pid_t>& pids) {
    for (pid_t pid : pids) {
      EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(pid); }, 5s)) << "pid " << pid << " survived";
    }
  }

  const nlohmann::json& Rank(const nlohmann::json& job, int rank) {
    for (const auto& r : job["ranks"]) {
      if (r["rank"] == rank) return r;
    }
    static const nlohmann::json kNone;
    return kNone;
  }

  std::string run_dir_;
  int baseline_fds_ = 0;
};

// Also one that then drops the job's environment (`setsid env -i`): in
// subreaper mode it has no marker, and is known as the orphan the
// supervisor adopted.
TEST_P(Containment, EscapedGrandchildIgnoringTermAndHupIsKilled) {
  for (const std::string escape : {"escape", "escape-scrubbed"}) {
    SCOPED_TRACE(escape);
    const std::string pidfile = d_.dir() + "/pids-" + escape;
    const std::string id = Submit({"--devices", "2", "--grace", "2s", "--", kChild, "--rank", "0",
                                   "pidfile:" + pidfile + "," + escape + ",hang", "hang"});
    // The rank and its escaped grandchild.
    ASSERT_TRUE(WaitFor([&] { return ReadPids(pidfile).size() == 2; }, 10s));
    const std::vector<pid_t> pids = ReadPids(pidfile);
    const pid_t rank = pids[0], escapee = pids[1];
    ASSERT_TRUE(ProcessAlive(escapee));
    if (escape == "escape-scrubbed") {
      ASSERT_TRUE(WaitFor(
          [&] { return ReadWhole("/proc/" + std::to_string(escapee) + "/comm") == "sleep\n"; },
          10s))
          << "the grandchild did not exec env -i sleep";
    }
    EXPECT_NE(SessionOf(escapee), SessionOf(rank)) << "the grandchild did not leave the session";
    if (GetParam() == "cgroup") {
      EXPECT_EQ(CgroupOf(rank), JobCgroup(id) + "/job-" + id + "/rank-0");
      EXPECT_EQ(CgroupOf(escapee), JobCgroup(id) + "/job-" + id + "/rank-0");
    }
    CmdResult k = d_.Ctl({"kill", id});
    ASSERT_EQ(k.exit_code, 0) << k.err;
    nlohmann::json job = ExpectEndedClean(id);
    EXPECT_EQ(job["state"], "CANCELLED");
    ExpectAllDead(pids);
  }
}

TEST_P(Containment, RankIgnoringSigtermIsKilledAfterGrace) {
  const std::string pidfile = d_.dir() + "/pids";
  const std::string id = Submit({"--devices", "2", "--grace", "500ms", "--", kChild, "--rank", "0",
                                 "ignore-term,pidfile:" + pidfile + ",hang", "hang"});
  ASSERT_TRUE(WaitFor([&] { return ReadPids(pidfile).size() == 1; }, 10s));
  ASSERT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  nlohmann::json job = ExpectEndedClean(id);
  EXPECT_EQ(job["state"], "CANCELLED");
  EXPECT_EQ(Rank(job, 0)["signal"], SIGKILL) << job.dump();
  EXPECT_EQ(Rank(job, 1)["signal"], SIGTERM) << job.dump();
  ExpectAllDead(ReadPids(pidfile));
}

TEST_P(Containment, StoppedRankHandlesSigtermWithoutWaitingForTheGrace) {
  const std::string pidfile = d_.dir() + "/pids";
  // A grace far longer than the wait below: only SIGCONT after SIGTERM
  // lets the stopped rank end before it.
  const std::string id = Submit({"--devices", "2", "--grace", "10m", "--", kChild, "--rank", "0",
                                 "pidfile:" + pidfile + ",stop", "hang"});
  ASSERT_TRUE(WaitFor([&] { return ReadPids(pidfile).size() == 1; }, 10s));
  const pid_t stopped = ReadPids(pidfile)[0];
  ASSERT_TRUE(
      WaitFor([&] { return ReadProcEntry(stopped).value_or(ProcEntry{}).state == 'T'; }, 10s));
  ASSERT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  nlohmann::json job = ExpectEndedClean(id, 60s);
  EXPECT_EQ(job["state"], "CANCELLED");
  EXPECT_EQ(Rank(job, 0)["signal"], SIGTERM) << job.dump();
  ExpectAllDead({stopped});
}

// Forks a child that leads a new process group and session numbered `pid`
// (clone3's set_tid, root only); -1 when the number could not be had. The
// number is asked for, not raced for through ns_last_pid: on a busy
// machine other processes took it first, 200 times in a row.
pid_t ForkGroupLeaderWithPid(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) return -1;
    clone_args args{};
    args.exit_signal = SIGCHLD;
    args.set_tid = reinterpret_cast<uintptr_t>(&pid);
    args.set_tid_size = 1;
    const long child = syscall(SYS_clone3, &args, sizeof args);
    if (child == 0) {
      setsid();
      close(ready[0]);
      (void)!write(ready[1], "x", 1);
      for (;;) pause();
    }
    const int err = errno;
    close(ready[1]);
    if (child > 0) {
      char c;
      (void)!read(ready[0], &c, 1);  // it leads its group now
      close(ready[0]);
      return static_cast<pid_t>(child);
    }
    close(ready[0]);
    // EEXIST: the number is not free yet (a zombie, a group that lives on).
    if (err != EEXIST || std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(10ms);
  }
}

TEST_P(Containment, AReapedRanksPidAndGroupAreNeverSignalled) {
  if (geteuid() != 0) GTEST_SKIP() << "taking a given pid (ns_last_pid) needs root";
  const std::string pidfile = d_.dir() + "/pids", pidfile0 = d_.dir() + "/pids.0";
  const std::string id =
      Submit({"--devices", "2", "--grace", "500ms", "--", kChild, "--rank", "0",
              "pidfile:" + pidfile0 + ",exit:0", "pidfile:" + pidfile + ",ignore-term,hang"});
  ASSERT_TRUE(WaitFor([&] { return ReadPids(pidfile0).size() == 1; }, 10s));
  const pid_t reaped = ReadPids(pidfile0)[0];
  // Reaped: not even a zombie is left of it.
  ASSERT_TRUE(WaitFor([&] { return !Exists("/proc/" + std::to_string(reaped)); }, 10s));
  // And ltd says so (the supervisor tells it).
  EXPECT_TRUE(WaitFor(
      [&] {
        const nlohmann::json job = d_.Show(id);
        const nlohmann::json r = job.contains("ranks") ? Rank(job, 0) : nlohmann::json();
        return r.is_object() && r.value("state", "") == "EXITED" && r["pid"] == reaped;
      },
      5s))
      << "rank 0 exited 0, reaped, but show still says\n"
      << d_.Show(id).dump(2);
  // An unrelated process group now carries the reaped rank's number, as
  // any process on the host may once the number is free.
  const pid_t impostor = ForkGroupLeaderWithPid(reaped);
  ASSERT_GT(impostor, 0) << "could not take pid " << reaped;
  ASSERT_EQ(getpgid(impostor), reaped);
  // The teardown: SIGTERM, SIGCONT, the grace, SIGKILL, then the sweep
  // once every rank is reaped.
  ASSERT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  nlohmann::json job = ExpectEndedClean(id);
  EXPECT_EQ(job["state"], "CANCELLED");
  EXPECT_EQ(Rank(job, 1)["signal"], SIGKILL) << job.dump();
  EXPECT_TRUE(ProcessAlive(impostor)) << "ltd signalled a process group it had reaped";
  kill(impostor, SIGKILL);
  waitpid(impostor, nullptr, 0);
}

TEST_P(Containment, FailingRankWithTwoHundredChildren) {
  const std::string pidfile = d_.dir() + "/pids";
  // fork returns once the child exists, so all 200 live when rank 0 exits
  // and leaves them orphaned.
  const std::string id = Submit({"--devices", "2", "--grace", "2s", "--", kChild, "--rank", "0",
                                 "pidfile:" + pidfile + ",fork:200,exit:4", "hang"});
  nlohmann::json job = ExpectEndedClean(id);
  EXPECT_EQ(job["state"], "FAILED");
  EXPECT_EQ(job["exit_code"], 4);
  EXPECT_EQ(job["root_cause"]["rank"], 0);
  ExpectAllDead(ReadPids(pidfile));
}

TEST_P(Containment, RankClosingStdoutEarlyAndEscapeeHoldingThePipes) {
  const std::string pidfile = d_.dir() + "/pids";
  // Rank 0 closes its output long before it exits; rank 1's escapee keeps
  // rank 1's pipes open after rank 1 exited. Neither may hold the job up.
  const std::string id = Submit({"--devices", "2", "--", kChild, "--rank", "0",
                                 "print:2,close-stdout,sleep:300,exit:0", "--rank", "1",
                                 "pidfile:" + pidfile + ",escape,print:3,exit:0"});
  nlohmann::json job = ExpectEndedClean(id);
  EXPECT_EQ(job["state"], "SUCCEEDED") << job.dump();
  ExpectAllDead(ReadPids(pidfile));
  CmdResult logs = d_.Ctl({"logs", id});
  EXPECT_NE(logs.out.find("line 1 of 2"), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("line 2 of 3"), std::string::npos) << logs.out;
}

TEST_P(Containment, LtdKilledMidJobLeavesNothingAndTheJobIsLost) {
  // Stand in for init: the supervisor, orphaned by ltd's death, comes to
  // this process, so the test can prove it ends and leaves no zombie.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const std::string pidfile = d_.dir() + "/pids";
  const std::string id = Submit({"--devices", "2", "--grace", "5s", "--", kChild,
                                 "pidfile:" + pidfile + ",escape,fork:3,hang"});
  // Per rank: itself, its escapee, 3 children.
  ASSERT_TRUE(WaitFor([&] { return ReadPids(pidfile).size() == 10; }, 10s));
  ASSERT_EQ(d_.Show(id)["state"], "RUNNING");
  const std::string old_run_dir = run_dir_;
  // --restore-window 0 (the harness's default): the supervisor sees ltd's
  // stream close and tears the job down at once.
  d_.KillHard();
  EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(d_.marker()).empty(); }, 10s))
      << ProcessesWithMarker(d_.marker()).size() << " process(es) of the job outlived ltd";
  ExpectAllDead(ReadPids(pidfile));
  // Reap every orphan, the supervisor included once its teardown is done.
  EXPECT_TRUE(WaitFor(ReapedAll, 10s)) << "a child of ltd (the supervisor?) is still running";
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
  if (GetParam() == "cgroup") {
    EXPECT_FALSE(Exists(JobCgroup(id))) << "the supervisor left it";
  }
  // The supervisor wrote the final record itself.
  auto record = nlohmann::json::parse(ReadWhole(d_.state_dir() + "/jobs/" + id + "/job.json"),
                                      nullptr, false);
  EXPECT_EQ(record.is_object() ? record.value("state", "") : "", "LOST") << record.dump();

  ASSERT_TRUE(d_.Start(DaemonArgs())) << d_.log();
  nlohmann::json job = d_.Show(id);
  EXPECT_EQ(job["state"], "LOST") << job.dump();
  EXPECT_EQ(job["root_cause"]["reason"], "daemon_lost") << job.dump();
  EXPECT_TRUE(ProcessesWithMarker(d_.marker()).empty());
  if (GetParam() == "cgroup") {
    // The killed ltd could not remove its own run cgroup; the next one
    // sweeps it.
    EXPECT_FALSE(Exists(old_run_dir)) << "left behind";
  }
  run_dir_ = RunDir();
  if (GetParam() == "cgroup") {
    EXPECT_NE(run_dir_, old_run_dir);
  }
}

// The job's supervisor SIGKILLed: its ranks die with it (PDEATHSIG), and
// ltd, which watches it through a pidfd, kills whatever else of the job
// is left (its cgroup, its marked processes: escapees too) and says the
// job is lost.
TEST_P(Containment, ASupervisorKilledTakesItsWholeJobWithIt) {
  const std::string pidfile = d_.dir() + "/pids";
  const std::string id = Submit({"--devices", "2", "--grace", "5s", "--", kChild,
                                 "pidfile:" + pidfile + ",escape,fork:3,hang"});
  ASSERT_TRUE(WaitFor([&] { return ReadPids(pidfile).size() == 10; }, 10s));
  ASSERT_EQ(d_.Show(id)["state"], "RUNNING");
  const std::vector<pid_t> shims = Supervisors(d_.state_dir(), id);
  ASSERT_EQ(shims.size(), 1u) << "no single lt-shim for job " << id;
  ASSERT_EQ(kill(shims[0], SIGKILL), 0);
  EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(d_.marker()).empty(); }, 5s))
      << ProcessesWithMarker(d_.marker()).size() << " process(es) of the job outlived it";
  ExpectAllDead(ReadPids(pidfile));
  ExpectAllDead(shims);
  if (GetParam() == "cgroup") {
    EXPECT_TRUE(WaitFor([&] { return !Exists(JobCgroup(id)); }, 5s)) << JobCgroup(id) << " left";
  }
  nlohmann::json job = d_.WaitEnded(id, 10s);
  EXPECT_EQ(job["state"], "LOST") << job.dump();
  EXPECT_EQ(job["root_cause"]["reason"], "supervisor_lost") << job.dump();
  EXPECT_TRUE(WaitFor([&] { return Zombies() == 0; }, 5s)) << Zombies() << " zombie(s)";
  // ltd goes on serving.
  nlohmann::json next = ExpectEndedClean(Submit({"--devices", "1", "--", kChild, "exit:0"}));
  EXPECT_EQ(next["state"], "SUCCEEDED") << next.dump();
}

// ltd and the job's supervisor both die (the supervisor first, while ltd
// is stopped and cannot clean up after it): the rank goes with the
// supervisor (PDEATHSIG), its escapee survives both, and the next ltd on
// the same state dir must find and kill it, and remove the old cgroups.
TEST_P(Containment, StartupSweepsWhatADeadLtdAndSupervisorLeft) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const std::string pidfile = d_.dir() + "/pids";
  const std::string id =
      Submit({"--devices", "1", "--", kChild, "pidfile:" + pidfile + ",escape,hang"});
  ASSERT_TRUE(WaitFor([&] { return ReadPids(pidfile).size() == 2; }, 10s));
  const pid_t rank = ReadPids(pidfile)[0], escapee = ReadPids(pidfile)[1];
  const std::vector<pid_t> shims = Supervisors(d_.state_dir(), id);
  ASSERT_EQ(shims.size(), 1u);
  ASSERT_EQ(kill(d_.pid(), SIGSTOP), 0);
  ASSERT_EQ(kill(shims[0], SIGKILL), 0);
  d_.KillHard();
  ASSERT_TRUE(WaitFor([&] { return !ProcessAlive(rank); }, 5s))
      << "the rank outlived its supervisor";
  ASSERT_TRUE(ProcessAlive(escapee)) << "the escapee should have outlived ltd and the supervisor";
  const std::string old_run_dir = run_dir_;
  if (GetParam() == "cgroup") {
    ASSERT_TRUE(Exists(old_run_dir));
    ASSERT_TRUE(Exists(JobCgroup(id)));
  }

  ASSERT_TRUE(d_.Start(DaemonArgs())) << d_.log();
  // ltd answers RPCs only once its start-up sweep is done.
  nlohmann::json job = d_.Show(id);
  EXPECT_EQ(job["state"], "LOST") << job.dump();
  EXPECT_EQ(job["root_cause"]["reason"], "supervisor_lost") << job.dump();
  EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(escapee); }, 5s)) << "escapee " << escapee;
  EXPECT_TRUE(ProcessesWithMarker(d_.marker()).empty());
  EXPECT_NE(d_.log().find("left by an earlier ltd"), std::string::npos);
  if (GetParam() == "cgroup") {
    EXPECT_FALSE(Exists(old_run_dir));
    EXPECT_FALSE(Exists(JobCgroup(id)));
  }
  EXPECT_TRUE(WaitFor(NoZombieChildren, 5s));
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
}

TEST_P(Containment, MaxRestartsTwoFailsTwiceThenSucceeds) {
  // Each attempt leaves an escaped grandchild behind, checks that no
  // process of an earlier attempt is alive, and fails until attempt 2.
  const std::string script = d_.dir() + "/attempt.sh";
  {
    std::ofstream out(script);
    out << R"(#!/bin/sh
dir="$1"
for f in "$dir"/pids.*; do
  [ -f "$f" ] || continue
  case "$f" in "$dir/pids.$TORCHELASTIC_RESTART_COUNT".*) continue ;; esac
  for pid in $(cat "$f"); do
    state=$(sed -n 's/^.*) \(.\).*$/\1/p' /proc/$pid/stat 2>/dev/null)
    if [ -n "$state" ] && [ "$state" != Z ]; then
      echo "attempt $TORCHELASTIC_RESTART_COUNT: pid $pid of an earlier attempt is alive" >&2
      exit 9
    fi
  done
done
)" << kChild
        << R"( "pidfile:$dir/pids.$TORCHELASTIC_RESTART_COUNT.$RANK,escape"
[ "$TORCHELASTIC_RESTART_COUNT" -ge 2 ] && exit 0
exit 7
)";
  }
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  const std::string id = Submit({"--devices", "2", "--max-restarts", "2", "--", script, d_.dir()});
  nlohmann::json job = ExpectEndedClean(id, 60s);
  EXPECT_EQ(job["state"], "SUCCEEDED")
      << job.dump(2) << ReadWhole(d_.state_dir() + "/jobs/" + id + "/output.log");
  EXPECT_EQ(job["exit_code"], 0);
  EXPECT_EQ(job["restart_count"], 2);
  ASSERT_EQ(job["attempts"].size(), 3u) << job.dump(2);
  for (int i = 0; i < 3; ++i) {
    const auto& a = job["attempts"][static_cast<size_t>(i)];
    EXPECT_EQ(a["restart_count"], i);
    if (i < 2) {
      EXPECT_EQ(a["root_cause"]["exit_code"], 7) << a.dump();
    } else {
      EXPECT_TRUE(a["root_cause"].is_null()) << a.dump();
    }
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    for (int rank = 0; rank < 2; ++rank) {
      const std::string f =
          d_.dir() + "/pids." + std::to_string(attempt) + "." + std::to_string(rank);
      // In a failed attempt a rank may be torn down before it wrote any.
      if (attempt == 2) {
        EXPECT_GE(ReadPids(f).size(), 1u) << f;
      }
      ExpectAllDead(ReadPids(f));
    }
  }
  // The human view lists every attempt too: a header and three rows.
  CmdResult show = d_.Ctl({"show", id});
  EXPECT_EQ(show.exit_code, 0);
  const size_t at = show.out.find("Attempts:\n");
  ASSERT_NE(at, std::string::npos) << show.out;
  std::istringstream table(show.out.substr(at + 10));
  int rows = 0;
  for (std::string line; std::getline(table, line) && !line.empty();) ++rows;
  EXPECT_EQ(rows, 4) << show.out;
}

// Each attempt says what CPU time its processes used, counted by their
// cgroup (a rank's descendants included); a containment without one says
// nothing rather than a guess.
TEST_P(Containment, EachAttemptSaysTheCpuTimeItsProcessesUsed) {
  // Each rank, and a child of it, spin for 0.2 s of their own CPU time.
  const std::string spin =
      "import os, time\n"
      "pid = os.fork()\n"
      "t = time.process_time()\n"
      "while time.process_time() - t < 0.2: pass\n"
      "if pid: os.waitpid(pid, 0)\n"
      "raise SystemExit(3 if os.environ['TORCHELASTIC_RESTART_COUNT'] == '0' else 0)\n";
  const std::string id =
      Submit({"--devices", "2", "--max-restarts", "1", "--", "/usr/bin/python3", "-c", spin});
  nlohmann::json job = ExpectEndedClean(id, 60s);
  EXPECT_EQ(job["state"], "SUCCEEDED") << job.dump(2);
  ASSERT_EQ(job["attempts"].size(), 2u) << job.dump(2);
  CmdResult show = d_.Ctl({"show", id});
  EXPECT_EQ(show.exit_code, 0);
  // A count as the JSON has it: a number, or (protobuf's JSON of an
  // int64) a string of one; none when absent or null.
  auto count = [](const nlohmann::json& a) -> std::optional<int64_t> {
    const auto it = a.find("cpu_us");
    if (it == a.end() || it->is_null()) return std::nullopt;
    return it->is_string() ? std::stoll(it->get<std::string>()) : it->get<int64_t>();
  };
  if (GetParam() != "cgroup") {
    for (const auto& a : job["attempts"]) EXPECT_FALSE(count(a)) << a.dump();
    EXPECT_EQ(show.out.find("CPU time:"), std::string::npos) << show.out;
    return;
  }
  int64_t total = 0;
  for (size_t i = 0; i < 2; ++i) {
    const auto& a = job["attempts"][i];
    ASSERT_TRUE(count(a)) << a.dump();
    const int64_t us = *count(a);
    // Four spinners of 0.2 s each when the attempt succeeds; when it fails,
    // the first rank out and its child spun whole before the teardown.
    // And little else: not a minute.
    EXPECT_GE(us, i == 0 ? 400'000 : 800'000) << a.dump();
    EXPECT_LT(us, 60'000'000) << a.dump();
    total += us;
  }
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3fs", static_cast<double>(total) / 1e6);
  EXPECT_NE(show.out.find(std::string("CPU time:      ") + seconds), std::string::npos)
      << seconds << "\n"
      << show.out;
}

INSTANTIATE_TEST_SUITE_P(Modes, Containment, ::testing::Values("cgroup", "subreaper"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ltd::test
