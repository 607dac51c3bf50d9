// Per-job supervisors end to end: a real ltd, its real lt-shim per job,
// and what happens to running jobs when ltd goes away and comes back
// (SIGKILL, SIGTERM, an upgrade), when it stays away past the restore
// window, when a supervisor's socket answers garbage or nothing, and when
// ltd is told to shut down. Each test starts ltd itself, with the restore
// window it is about. After each: no process of the test's jobs, no
// supervisor, no zombie, no supervisor socket left.
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "e2e_fixture.h"

namespace ltd::test {
namespace {

const std::string kChild = TestChildPath();

void Touch(const std::string& path) { std::ofstream(path) << "go\n"; }

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A Unix socket the test listens on: what ltd finds at a dead
// supervisor's supervisor.sock (or an earlier release's shim.sock).
// Silent (never accepts; connections wait in the backlog) or, with
// `garbage`, answering every connection with bytes that are neither a
// frame nor HTTP/2, then hanging up.
class FakeSupervisorSocket {
 public:
  FakeSupervisorSocket(const std::string& path, bool garbage) : path_(path) {
    unlink(path_.c_str());
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    ok_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
          listen(fd_, 16) == 0;
    if (ok_ && garbage) {
      answering_ = std::thread([this] {
        while (!stop_) {
          pollfd p{fd_, POLLIN, 0};
          if (poll(&p, 1, 50) <= 0) continue;
          const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
          if (c < 0) continue;
          static constexpr char kGarbage[] = "\xff\x00garbage, not HTTP/2\r\n\r\n\x01\x02\x03";
          // ltd may hang up first: no SIGPIPE for the test.
          (void)!send(c, kGarbage, sizeof kGarbage, MSG_NOSIGNAL);
          ++answered_;
          close(c);
        }
      });
    }
  }
  ~FakeSupervisorSocket() {
    stop_ = true;
    if (answering_.joinable()) answering_.join();
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
  }
  FakeSupervisorSocket(const FakeSupervisorSocket&) = delete;
  FakeSupervisorSocket& operator=(const FakeSupervisorSocket&) = delete;

  bool ok() const { return ok_; }
  int answered() const { return answered_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<int> answered_{0};
  std::thread answering_;
};

class SupervisorE2E : public E2E {
 protected:
  // Each test starts ltd itself, with the restore window it is about.
  void SetUp() override {}

  void TearDown() override {
    // With a restore window ltd leaves running jobs to their supervisors
    // when it stops: `ltctl shutdown` ends them first.
    if (d_.pid() > 0) {
      CmdResult r = d_.Ctl({"shutdown"}, 60s);
      EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
      EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(d_.pid()); }, 30s)) << "ltd did not stop";
      EXPECT_EQ(d_.Stop(), 0);
    }
    // Every supervisor exits once its job has ended.
    EXPECT_TRUE(WaitFor([&] { return Supervisors(d_.state_dir()).empty(); }, 10s))
        << Supervisors(d_.state_dir()).size() << " supervisor(s) left";
    for (pid_t shim : Supervisors(d_.state_dir())) kill(shim, SIGKILL);
    EXPECT_TRUE(WaitFor([&] { return Supervisors(d_.state_dir()).empty(); }, 5s));
    // The spare goes with ltd, however ltd went.
    EXPECT_TRUE(WaitFor([&] { return SpareSupervisors(d_.state_dir()).empty(); }, 10s))
        << "a spare supervisor outlived ltd";
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(d_.state_dir() + "/jobs", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      for (const char* socket : {"supervisor.sock", "shim.sock"}) {
        EXPECT_FALSE(std::filesystem::exists(it->path() / socket)) << it->path() << "/" << socket;
      }
    }
    E2E::TearDown();
  }

  bool Start(const std::string& window, std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--restore-window", window});
    return d_.Start(extra);
  }

  // The job's rank pids once every rank runs (empty until then).
  std::vector<pid_t> RankPids(const std::string& id) const {
    const nlohmann::json job = d_.Show(id);
    std::vector<pid_t> pids;
    if (job.value("state", "") != "RUNNING" || !job.contains("ranks")) return pids;
    for (const auto& r : job["ranks"]) {
      if (r.value("state", "") != "RUNNING" || !r["pid"].is_number()) return {};
      pids.push_back(r["pid"].get<pid_t>());
    }
    return pids;
  }

  std::vector<pid_t> WaitRunning(const std::string& id, size_t ranks) const {
    std::vector<pid_t> pids;
    EXPECT_TRUE(WaitFor(
        [&] {
          pids = RankPids(id);
          return pids.size() == ranks;
        },
        20s))
        << d_.Show(id).dump(2);
    return pids;
  }

  // The job's record as its supervisor last wrote it; readable with ltd down.
  nlohmann::json Record(const std::string& id) const {
    nlohmann::json j = nlohmann::json::parse(
        ReadWhole(d_.state_dir() + "/jobs/" + id + "/job.json"), nullptr, false);
    return j.is_object() ? j : nlohmann::json::object();
  }

  // `ltctl attach ID` in the background, its output into files (read them
  // while it runs); get() gives its exit code.
  std::future<int> AttachInBackground(const std::string& id, const std::string& out,
                                      const std::string& err) const {
    return std::async(std::launch::async, [=, this] {
      return RunCommand(
                 {"/bin/sh", "-c", "exec \"$0\" --socket \"$1\" attach \"$2\" >\"$3\" 2>\"$4\"",
                  LtctlPath(), d_.socket(), id, out, err},
                 {}, 120s)
          .exit_code;
    });
  }

  // ltd gone, whichever way `stop` ends it, with the job still running
  // under its supervisor: the next ltd adopts it, and it ends right.
  void ExpectAdoptedAfter(const std::function<void()>& stop) {
    ASSERT_TRUE(Start("10m")) << d_.log();
    const std::string go = d_.dir() + "/GO";
    const std::string id =
        SubmitDetached({"--devices", "2", "--", kChild, "waitfile:" + go + ",exit:3"});
    const std::vector<pid_t> pids = WaitRunning(id, 2);
    ASSERT_EQ(pids.size(), 2u);
    const std::vector<pid_t> shims = Supervisors(d_.state_dir(), id);
    ASSERT_EQ(shims.size(), 1u);
    stop();
    for (pid_t pid : pids) EXPECT_TRUE(ProcessAlive(pid)) << "rank pid " << pid << " died with ltd";
    EXPECT_TRUE(ProcessAlive(shims[0])) << "the supervisor died with ltd";
    EXPECT_EQ(Record(id).value("state", ""), "RUNNING");

    ASSERT_TRUE(Start("10m")) << d_.log();
    // ltd answers once it has adopted what it found (its socket may
    // accept a moment before).
    CmdResult ps = d_.Ctl({"ps"});
    EXPECT_EQ(ps.exit_code, 0) << ps.err;
    EXPECT_NE(ps.out.find("RUNNING"), std::string::npos) << ps.out;
    nlohmann::json job = d_.Show(id);
    EXPECT_EQ(job["state"], "RUNNING") << job.dump(2);
    EXPECT_EQ(RankPids(id), pids) << job.dump(2);
    EXPECT_NE(
        d_.log().find("job=" + id + " adopted its supervisor, pid " + std::to_string(shims[0])),
        std::string::npos);

    // Attached to the adopted job: its end comes through the new ltd.
    std::future<int> attach =
        AttachInBackground(id, d_.dir() + "/attach.out", d_.dir() + "/attach.err");
    Touch(go);
    EXPECT_EQ(attach.get(), 3) << ReadWhole(d_.dir() + "/attach.err");
    job = d_.WaitEnded(id);
    EXPECT_EQ(job["state"], "FAILED") << job.dump(2);
    EXPECT_EQ(job["exit_code"], 3);
    EXPECT_EQ(job["root_cause"]["reason"], "exited") << job.dump(2);
    EXPECT_EQ(job["root_cause"]["exit_code"], 3) << job.dump(2);
    ExpectAllDead(pids);
  }

  static void ExpectAllDead(const std::vector<pid_t>& pids) {
    for (pid_t pid : pids) {
      EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(pid); }, 5s)) << "pid " << pid << " survived";
    }
  }
};

// sched_getscheduler without the SCHED_RESET_ON_FORK bit; -1 when gone.
int Policy(pid_t pid) {
  const int p = sched_getscheduler(pid);
  return p < 0 ? -1 : p & ~SCHED_RESET_ON_FORK;
}

TEST_F(SupervisorE2E, ASpareWaitsAtIdlePriorityAndBecomesTheNextJobsSupervisor) {
  ASSERT_TRUE(Start("0"));
  pid_t spare = 0;
  ASSERT_TRUE(WaitFor([&] { return (spare = ReadySpare(d_.state_dir())) != 0; }, 20s))
      << SpareSupervisors(d_.state_dir()).size() << " spare(s)\n"
      << d_.log();
  EXPECT_TRUE(Supervisors(d_.state_dir()).empty()) << "a spare counts as no job's supervisor";

  const std::string id = SubmitDetached({"--devices", "2", "--", kChild, "hang"});
  ASSERT_EQ(WaitRunning(id, 2).size(), 2u);
  // The spare is the job's supervisor now, at normal priority, and says
  // whose in its command line; another spare waits in its place.
  EXPECT_EQ(Supervisors(d_.state_dir(), id), std::vector<pid_t>{spare});
  EXPECT_EQ(Policy(spare), SCHED_OTHER);
  EXPECT_TRUE(WaitFor(
      [&] {
        const std::vector<pid_t> spares = SpareSupervisors(d_.state_dir());
        return spares.size() == 1 && spares[0] != spare;
      },
      20s));
  ASSERT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  EXPECT_EQ(d_.WaitEnded(id)["state"], "CANCELLED");
  // The job's ranks ran under it and are gone with it.
  EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(d_.marker()).empty(); }, 10s));
}

// More supervisors free at once than ltd keeps: the others are killed
// and reaped, none left a zombie, and 16 wait.
TEST_F(SupervisorE2E, SupervisorsFreeBeyondTheSparesKeptAreReaped) {
  ASSERT_TRUE(Start("0", {"--devices", "24"}));
  std::vector<std::string> ids;
  for (int i = 0; i < 24; ++i)
    ids.push_back(SubmitDetached({"--devices", "1", "--", kChild, "hang"}));
  for (const std::string& id : ids) ASSERT_EQ(WaitRunning(id, 1).size(), 1u) << id;
  for (const std::string& id : ids) ASSERT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  for (const std::string& id : ids) EXPECT_EQ(d_.WaitEnded(id)["state"], "CANCELLED");
  EXPECT_TRUE(WaitFor(
      [&] {
        return Supervisors(d_.state_dir()).empty() &&
               SpareSupervisors(d_.state_dir()).size() == 16 && ZombieChildrenOf(d_.pid()).empty();
      },
      20s))
      << SpareSupervisors(d_.state_dir()).size() << " spares, " << ZombieChildrenOf(d_.pid()).size()
      << " zombies of ltd";
}

TEST_F(SupervisorE2E, ASpareEndsWithLtdEvenSigkilled) {
  ASSERT_TRUE(Start("10m"));
  std::vector<pid_t> spares;
  ASSERT_TRUE(WaitFor(
      [&] {
        spares = SpareSupervisors(d_.state_dir());
        return spares.size() == 1;
      },
      20s));
  d_.KillHard();
  // Its pipe from ltd reads EOF: it exits, whatever it was doing.
  EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(spares[0]); }, 20s));
  EXPECT_TRUE(SpareSupervisors(d_.state_dir()).empty());
}

TEST_F(SupervisorE2E, SigkillOfLtdLeavesTheJobRunningAndTheNextLtdAdoptsIt) {
  ExpectAdoptedAfter([&] { d_.KillHard(); });
}

TEST_F(SupervisorE2E, SigtermOfLtdLikewise) {
  ExpectAdoptedAfter([&] { EXPECT_EQ(d_.Stop(), 0); });
}

TEST_F(SupervisorE2E, AnAttachedClientFollowsTheJobThroughAnLtdRestart) {
  ASSERT_TRUE(Start("10m")) << d_.log();
  const std::string go = d_.dir() + "/GO";
  const std::string id =
      SubmitDetached({"--devices", "1", "--", kChild,
                      "print:1,waitfile:" + go + ",stderr:after the restart,print:2,exit:3"});
  ASSERT_EQ(WaitRunning(id, 1).size(), 1u);
  const std::string out = d_.dir() + "/attach.out", err = d_.dir() + "/attach.err";
  std::future<int> attach = AttachInBackground(id, out, err);
  const std::string opened = "job=" + id + " attach stream opened";
  ASSERT_TRUE(WaitFor([&] { return Count(d_.log(), opened) == 1; }, 10s)) << d_.log();

  d_.KillHard();
  ASSERT_TRUE(WaitFor(
      [&] { return ReadWhole(err).find("waiting for it to come back") != std::string::npos; }, 10s))
      << ReadWhole(err);
  ASSERT_TRUE(Start("10m")) << d_.log();
  // It follows the job again (ltd logs the new stream) before it goes on.
  ASSERT_TRUE(WaitFor([&] { return Count(d_.log(), opened) == 2; }, 20s)) << ReadWhole(err);
  Touch(go);
  EXPECT_EQ(attach.get(), 3);
  const std::string o = ReadWhole(out), e = ReadWhole(err);
  EXPECT_EQ(Count(e, "ltctl: lost ltd ("), 1u) << e;
  EXPECT_EQ(Count(e, "waiting for it to come back"), 1u) << e;
  EXPECT_EQ(Count(e, "ltctl: ltd is back; following job " + id + " again"), 1u) << e;
  EXPECT_NE(e.find("[0] after the restart"), std::string::npos) << e;
  EXPECT_NE(o.find("[0] line 0 of 2"), std::string::npos) << o;
  EXPECT_NE(o.find("[0] line 1 of 2"), std::string::npos) << o;
  EXPECT_NE(e.find("exit code 3"), std::string::npos) << e;
  nlohmann::json job = d_.WaitEnded(id);
  EXPECT_EQ(job["state"], "FAILED") << job.dump(2);
  EXPECT_EQ(job["exit_code"], 3);
}

// An attach across a stop of ltd (SIGTERM: its gRPC server cancels every
// call) says so in ltctl's words, not gRPC's ("Cancelling all calls"),
// then follows the job on under the next ltd.
TEST_F(SupervisorE2E, AnAttachAcrossAnLtdStopSaysSoInItsOwnWords) {
  ASSERT_TRUE(Start("10m")) << d_.log();
  const std::string go = d_.dir() + "/GO";
  const std::string id =
      SubmitDetached({"--devices", "1", "--", kChild, "waitfile:" + go + ",exit:0"});
  ASSERT_EQ(WaitRunning(id, 1).size(), 1u);
  const std::string out = d_.dir() + "/attach.out", err = d_.dir() + "/attach.err";
  std::future<int> attach = AttachInBackground(id, out, err);
  const std::string opened = "job=" + id + " attach stream opened";
  ASSERT_TRUE(WaitFor([&] { return Count(d_.log(), opened) == 1; }, 10s)) << d_.log();
  EXPECT_EQ(d_.Stop(), 0);
  ASSERT_TRUE(WaitFor(
      [&] { return ReadWhole(err).find("waiting for it to come back") != std::string::npos; }, 10s))
      << ReadWhole(err);
  ASSERT_TRUE(Start("10m")) << d_.log();
  ASSERT_TRUE(WaitFor([&] { return Count(d_.log(), opened) == 2; }, 20s)) << ReadWhole(err);
  Touch(go);
  EXPECT_EQ(attach.get(), 0);
  EXPECT_EQ(ReadWhole(err),
            "ltctl: lost ltd (it stopped or restarted); waiting for it to come back\n"
            "ltctl: ltd is back; following job " +
                id + " again\n");
}

// `logs -f` goes on through a restart of ltd from where it was: every
// line once, none twice.
TEST_F(SupervisorE2E, LogsFollowGoesOnThroughAnLtdRestartWithoutRepeatingALine) {
  ASSERT_TRUE(Start("10m")) << d_.log();
  const std::string go = d_.dir() + "/GO";
  const std::string id = SubmitDetached(
      {"--devices", "2", "--", kChild, "print:3,waitfile:" + go + ",print:2,exit:0"});
  ASSERT_EQ(WaitRunning(id, 2).size(), 2u);
  const std::string out = d_.dir() + "/logs.out", err = d_.dir() + "/logs.err";
  std::future<int> logs = std::async(std::launch::async, [&] {
    return RunCommand(
               {"/bin/sh", "-c", "exec \"$0\" --socket \"$1\" logs -f \"$2\" >\"$3\" 2>\"$4\"",
                LtctlPath(), d_.socket(), id, out, err},
               {}, 120s)
        .exit_code;
  });
  // Both ranks' first lines are out before ltd goes.
  ASSERT_TRUE(WaitFor([&] { return Count(ReadWhole(out), "\n") == 6; }, 20s)) << ReadWhole(out);
  d_.KillHard();
  ASSERT_TRUE(WaitFor(
      [&] { return ReadWhole(err).find("waiting for it to come back") != std::string::npos; }, 10s))
      << ReadWhole(err);
  ASSERT_TRUE(Start("10m")) << d_.log();
  ASSERT_EQ(d_.Ctl({"ps"}).exit_code, 0);
  Touch(go);
  EXPECT_EQ(logs.get(), 0) << ReadWhole(err);
  const std::string o = ReadWhole(out), e = ReadWhole(err);
  EXPECT_EQ(Count(o, "\n"), 10u) << o;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(Count(o, "[" + std::to_string(rank) + "] line 0 of 3\n"), 1u) << o;
    EXPECT_EQ(Count(o, "[" + std::to_string(rank) + "] line 1 of 2\n"), 1u) << o;
  }
  EXPECT_EQ(Count(e, "ltctl: lost ltd ("), 1u) << e;
  EXPECT_EQ(Count(e, "following the log of job " + id + " again"), 1u) << e;
  EXPECT_EQ(d_.WaitEnded(id)["state"], "SUCCEEDED");
}

TEST_F(SupervisorE2E, ARankThatHangsWhileLtdIsDownIsTornDownOnTime) {
  // No stacks taken: the teardown follows the hang at once.
  ASSERT_TRUE(Start("10m", {"--stack-budget", "0"})) << d_.log();
  const std::string go = d_.dir() + "/GO";
  // It beats only once ltd is gone, then hangs: only the supervisor can
  // see it.
  const std::string id = SubmitDetached({"--devices", "2", "--heartbeat-timeout", "1s", "--",
                                         kChild, "waitfile:" + go + ",beat:3:50,hang"});
  ASSERT_EQ(WaitRunning(id, 2).size(), 2u);
  d_.KillHard();
  Touch(go);
  nlohmann::json record;
  EXPECT_TRUE(WaitFor(
      [&] {
        record = Record(id);
        return record.value("state", "") == "FAILED";
      },
      60s))
      << record.dump(2);
  EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(d_.marker()).empty(); }, 10s));

  ASSERT_TRUE(Start("10m")) << d_.log();
  nlohmann::json job = d_.WaitEnded(id);
  EXPECT_EQ(job["state"], "FAILED") << job.dump(2);
  EXPECT_EQ(job["exit_code"], 124) << job.dump(2);
  EXPECT_EQ(job["root_cause"]["reason"], "hang") << job.dump(2);
}

TEST_F(SupervisorE2E, TheRestoreWindowRunsOutAndTheJobIsLost) {
  ASSERT_TRUE(Start("1s")) << d_.log();
  const std::string pidfile = d_.dir() + "/pids";
  const std::string id =
      SubmitDetached({"--devices", "2", "--", kChild, "pidfile:" + pidfile + ",escape,hang"});
  ASSERT_EQ(WaitRunning(id, 2).size(), 2u);
  ASSERT_TRUE(WaitFor([&] { return Count(ReadWhole(pidfile), "\n") == 4; }, 10s));
  d_.KillHard();
  EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(d_.marker()).empty(); }, 30s))
      << ProcessesWithMarker(d_.marker()).size() << " process(es) of the job left";
  nlohmann::json record;
  EXPECT_TRUE(WaitFor(
      [&] {
        record = Record(id);
        return record.value("state", "") == "LOST";
      },
      10s))
      << record.dump(2);
  EXPECT_EQ(record["root_cause"]["reason"], "daemon_lost") << record.dump(2);
  EXPECT_TRUE(WaitFor([&] { return Supervisors(d_.state_dir()).empty(); }, 10s));

  ASSERT_TRUE(Start("1s")) << d_.log();
  nlohmann::json job = d_.Show(id);
  EXPECT_EQ(job["state"], "LOST") << job.dump(2);
  EXPECT_EQ(job["root_cause"]["reason"], "daemon_lost") << job.dump(2);
}

TEST_F(SupervisorE2E, LtctlShutdownEndsEveryJobThenLtd) {
  ASSERT_TRUE(Start("10m")) << d_.log();
  const std::string a = SubmitDetached({"--devices", "1", "--", kChild, "hang"});
  const std::string b = SubmitDetached({"--devices", "2", "--", kChild, "hang"});
  ASSERT_EQ(WaitRunning(a, 1).size(), 1u);
  ASSERT_EQ(WaitRunning(b, 2).size(), 2u);

  if (geteuid() != 0 || access("/usr/sbin/useradd", X_OK) != 0) {
    std::fprintf(stderr,
                 "[  NOTE    ] not root (or no useradd): a non-root shutdown is not tried\n");
  } else {
    TestUser user("ltsd" + std::to_string(getpid()));
    ASSERT_TRUE(user.ok()) << user.error();
    PublicDir bin;
    const std::string ltctl = bin.Copy(LtctlPath());
    d_.LetUsersConnect();
    CmdResult r = RunCommandAs(user.As(), {ltctl, "--socket", d_.socket(), "shutdown"}, {}, 30s);
    EXPECT_NE(r.exit_code, 0) << "a non-root user shut ltd down";
    EXPECT_FALSE(r.err.empty());
    EXPECT_TRUE(ProcessAlive(d_.pid()));
    EXPECT_EQ(d_.Show(a)["state"], "RUNNING");
    EXPECT_EQ(d_.Show(b)["state"], "RUNNING");
  }

  CmdResult r = d_.Ctl({"shutdown"}, 60s);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // ltd stops by itself (the test's child: a zombie until Stop reaps it).
  EXPECT_TRUE(WaitFor([&] { return !ProcessAlive(d_.pid()); }, 30s));
  EXPECT_EQ(d_.Stop(), 0);
  EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(d_.marker()).empty(); }, 5s));
  EXPECT_TRUE(WaitFor([&] { return Supervisors(d_.state_dir()).empty(); }, 10s));

  ASSERT_TRUE(Start("10m")) << d_.log();
  for (const std::string& id : {a, b}) {
    nlohmann::json job = d_.Show(id);
    EXPECT_EQ(job["state"], "CANCELLED") << job.dump(2);
  }
}

// Both wires: this release's frames (supervisor.sock) and an earlier
// release's gRPC (shim.sock, where no supervisor.sock is).
TEST_F(SupervisorE2E, AGarbageOrSilentSupervisorSocketDoesNotWedgeStartup) {
  ASSERT_TRUE(Start("10m")) << d_.log();
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(SubmitDetached({"--devices", "1", "--", kChild, "hang"}));
    ASSERT_EQ(WaitRunning(ids.back(), 1).size(), 1u);
  }
  std::vector<pid_t> shims = Supervisors(d_.state_dir());
  ASSERT_EQ(shims.size(), 4u);
  // ltd stopped cannot see its supervisors die; then it dies too.
  ASSERT_EQ(kill(d_.pid(), SIGSTOP), 0);
  for (pid_t shim : shims) ASSERT_EQ(kill(shim, SIGKILL), 0);
  d_.KillHard();
  ExpectAllDead(shims);
  EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(d_.marker()).empty(); }, 5s));
  auto dir = [&](int i) { return d_.state_dir() + "/jobs/" + ids[i]; };
  // Jobs 2 and 3 as an earlier release's supervisors left them.
  for (int i : {2, 3}) std::filesystem::remove(dir(i) + "/supervisor.sock");
  {
    FakeSupervisorSocket quiet(dir(0) + "/supervisor.sock", false);
    FakeSupervisorSocket noise(dir(1) + "/supervisor.sock", true);
    FakeSupervisorSocket old_quiet(dir(2) + "/shim.sock", false);
    FakeSupervisorSocket old_noise(dir(3) + "/shim.sock", true);
    for (auto* fake : {&quiet, &noise, &old_quiet, &old_noise}) {
      ASSERT_TRUE(fake->ok()) << std::strerror(errno);
    }
    ASSERT_TRUE(Start("10m")) << "ltd did not start:\n" << d_.log();
    // Its socket accepts before it has probed; it answers calls after.
    CmdResult ps = d_.Ctl({"ps"}, 15s);
    EXPECT_EQ(ps.exit_code, 0) << ps.err;
    EXPECT_GT(noise.answered(), 0) << "ltd never asked the garbage socket";
    EXPECT_GT(old_noise.answered(), 0) << "ltd never asked the garbage gRPC socket";
  }
  for (const std::string& id : ids) {
    nlohmann::json job = d_.Show(id);
    EXPECT_EQ(job["state"], "LOST") << job.dump(2);
    EXPECT_EQ(job["root_cause"]["reason"], "supervisor_lost") << job.dump(2);
    EXPECT_NE(d_.log().find("job=" + id + " no supervisor answered"), std::string::npos) << id;
  }
  // And it serves.
  CmdResult r = d_.Ctl({"submit", "--devices", "1", "--", kChild, "exit:0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(SupervisorE2E, AnUpgradedLtdAdoptsASupervisorOfAnotherBuild) {
  // The "old" release: the build's binaries elsewhere, its lt-shim a
  // different file (an ELF runs with bytes after its end).
  const std::string old = d_.dir() + "/old";
  ASSERT_TRUE(std::filesystem::create_directory(old));
  const std::filesystem::path build = std::filesystem::path(LtdPath()).parent_path();
  for (const char* name : {"ltd", "lt-exec", "lt-shim", "lt-shim-etcd", "lt-userio"}) {
    std::filesystem::copy_file(build / name, old + "/" + name);
  }
  std::ofstream(old + "/lt-shim", std::ios::app | std::ios::binary) << "another build";
  ASSERT_NE(ReadWhole(old + "/lt-shim"), ReadWhole((build / "lt-shim").string()));

  d_.set_binary(old + "/ltd");
  ASSERT_TRUE(Start("10m")) << d_.log();
  const std::string go = d_.dir() + "/GO";
  const std::string id =
      SubmitDetached({"--devices", "2", "--", kChild, "waitfile:" + go + ",exit:0"});
  const std::vector<pid_t> pids = WaitRunning(id, 2);
  ASSERT_EQ(pids.size(), 2u);
  const std::vector<pid_t> shims = Supervisors(d_.state_dir(), id);
  ASSERT_EQ(shims.size(), 1u);
  std::error_code ec;
  EXPECT_EQ(std::filesystem::read_symlink("/proc/" + std::to_string(shims[0]) + "/exe", ec),
            old + "/lt-shim");
  d_.KillHard();

  d_.set_binary("");
  ASSERT_TRUE(Start("10m")) << d_.log();
  nlohmann::json job = d_.Show(id);
  EXPECT_EQ(job["state"], "RUNNING") << job.dump(2);
  EXPECT_EQ(RankPids(id), pids);
  EXPECT_NE(d_.log().find("job=" + id + " adopted its supervisor, pid " + std::to_string(shims[0])),
            std::string::npos);
  Touch(go);
  job = d_.WaitEnded(id);
  EXPECT_EQ(job["state"], "SUCCEEDED") << job.dump(2);
  EXPECT_EQ(job["exit_code"], 0);
  ExpectAllDead(pids);
  ExpectAllDead(shims);
}

}  // namespace
}  // namespace ltd::test

namespace ltd::test {
namespace {

// PENDING jobs survive a restart of ltd, in their order: with one device
// held by a running job, two jobs wait; after the restart, the first of
// them starts once the device is free, the second still waits.
TEST_F(SupervisorE2E, PendingJobsSurviveARestartInTheirOrder) {
  ASSERT_TRUE(Start("10m", {"--devices", "1"})) << d_.log();
  const std::string holder = SubmitDetached({"--devices", "1", "--", kChild, "hang"});
  WaitRunning(holder, 1);
  const std::string first = SubmitDetached({"--devices", "1", "--", kChild, "hang"});
  const std::string second = SubmitDetached({"--devices", "1", "--", kChild, "hang"});
  EXPECT_EQ(d_.Show(first)["state"], "PENDING");
  EXPECT_EQ(d_.Show(second)["state"], "PENDING");
  EXPECT_EQ(d_.Stop(), 0);

  ASSERT_TRUE(Start("10m", {"--devices", "1"})) << d_.log();
  EXPECT_EQ(d_.Show(holder)["state"], "RUNNING");
  EXPECT_EQ(d_.Show(first)["state"], "PENDING");
  EXPECT_EQ(d_.Show(second)["state"], "PENDING");
  ASSERT_EQ(d_.Ctl({"kill", holder}).exit_code, 0);
  d_.WaitEnded(holder);
  WaitRunning(first, 1);
  EXPECT_EQ(d_.Show(second)["state"], "PENDING");
}

}  // namespace
}  // namespace ltd::test
