// ltd and ltctl end to end: real daemon, real client, real ranks.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <thread>

#include "e2e_fixture.h"

namespace ltd::test {
namespace {

const std::string kChild = TestChildPath();

TEST_F(E2E, CleanFourRankJobGetsTheTorchrunEnvironment) {
  CmdResult r =
      d_.Ctl({"submit", "--devices", "4", "--env", "LT_TEST_EXTRA=yes", "--", kChild, "env"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string p = "[" + std::to_string(rank) + "] ";
    EXPECT_NE(r.out.find(p + "RANK=" + std::to_string(rank) + "\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(p + "LOCAL_RANK=" + std::to_string(rank) + "\n"), std::string::npos);
  }
  for (const char* kv :
       {"WORLD_SIZE=4", "LOCAL_WORLD_SIZE=4", "GROUP_RANK=0", "NODE_RANK=0", "ROLE_NAME=default",
        "MASTER_ADDR=127.0.0.1", "TORCHELASTIC_RUN_ID=1", "TORCHELASTIC_RESTART_COUNT=0",
        "TORCHELASTIC_MAX_RESTARTS=0", "OMP_NUM_THREADS=1", "USE_LIBUV=0", "PYTHONFAULTHANDLER=1",
        "LT_JOB_ID=1", "LT_HEARTBEAT_FD=3", "LT_TEST_EXTRA=yes", "GROUP_WORLD_SIZE=1"}) {
    EXPECT_NE(r.out.find(std::string("] ") + kv + "\n"), std::string::npos) << kv << "\n" << r.out;
  }
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["state"], "SUCCEEDED");
  EXPECT_EQ(job["exit_code"], 0);
  EXPECT_TRUE(job["root_cause"].is_null());
  const int port = job["master_port"];
  EXPECT_NE(r.out.find("MASTER_PORT=" + std::to_string(port) + "\n"), std::string::npos);
  ASSERT_EQ(job["ranks"].size(), 4u);
  for (const auto& rank : job["ranks"]) {
    EXPECT_EQ(rank["state"], "EXITED");
    EXPECT_EQ(rank["exit_code"], 0);
  }
  for (const char* key : {"id", "name", "user", "state", "exit_code", "devices", "master_port",
                          "submitted_at", "started_at", "ended_at", "root_cause", "ranks"}) {
    EXPECT_TRUE(job.contains(key)) << key;
  }
}

TEST_F(E2E, RankExitingThreeTearsDownTheOthers) {
  CmdResult r =
      d_.Ctl({"submit", "--devices", "4", "--", kChild, "--rank", "2", "sleep:100,exit:3", "hang"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("rank 2 exited with code 3"), std::string::npos) << r.err;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["state"], "FAILED");
  EXPECT_EQ(job["exit_code"], 3);
  EXPECT_EQ(job["root_cause"]["rank"], 2);
  EXPECT_EQ(job["root_cause"]["reason"], "exited");
  EXPECT_EQ(job["root_cause"]["exit_code"], 3);
  for (const auto& rank : job["ranks"]) {
    if (rank["rank"] == 2) {
      EXPECT_EQ(rank["state"], "FAILED");
    } else {
      EXPECT_EQ(rank["state"], "KILLED");
      EXPECT_EQ(rank["signal"], SIGTERM);
    }
  }
}

TEST_F(E2E, SegfaultingRankExits139) {
  CmdResult r = d_.Ctl(
      {"submit", "--devices", "3", "--", kChild, "--rank", "1", "sleep:50,signal:11", "hang"});
  EXPECT_EQ(r.exit_code, 139) << r.err;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["root_cause"]["reason"], "signaled");
  EXPECT_EQ(job["root_cause"]["signal"], 11);
  EXPECT_EQ(job["root_cause"]["rank"], 1);
}

// A real uncaught exception in a thread (as PyTorch's NCCL watchdog
// throws): libstdc++'s words on stderr name it in the root cause.
TEST_F(E2E, AnUncaughtExceptionsAbortNamesTheException) {
  CmdResult r = d_.Ctl({"submit", "--devices", "2", "--", kChild, "--rank", "1",
                        "sleep:50,throw:collective timed out", "hang"});
  EXPECT_EQ(r.exit_code, 134) << r.err;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["root_cause"]["rank"], 1);
  EXPECT_EQ(job["root_cause"]["message"],
            "rank 1 died of signal 6 (ABRT): terminate called after throwing "
            "std::runtime_error: collective timed out")
      << job.dump(2);
}

TEST_F(E2E, KillCancelsTheJobAndWaitReports130) {
  const std::string id =
      SubmitDetached({"--devices", "2", "--name", "victim", "--", kChild, "hang"});
  ASSERT_EQ(id, "1");
  CmdResult k = d_.Ctl({"kill", "victim"});
  EXPECT_EQ(k.exit_code, 0) << k.err;
  CmdResult w = d_.Ctl({"wait", id});
  EXPECT_EQ(w.exit_code, 130) << w.err;
  nlohmann::json job = d_.Show(id);
  EXPECT_EQ(job["state"], "CANCELLED");
  EXPECT_EQ(job["root_cause"]["reason"], "cancelled");
  EXPECT_TRUE(job["root_cause"]["rank"].is_null());
}

TEST_F(E2E, CtrlCOnAnAttachedSubmitTearsTheJobDownAndReportsIt) {
  std::thread interrupter;
  CmdResult r = RunCommand(
      {LtctlPath(), "--socket", d_.socket(), "submit", "--devices", "2", "--", kChild, "hang"},
      {d_.marker()}, 30s, [&](pid_t pid) {
        interrupter = std::thread([this, pid] {
          WaitFor([&] { return d_.Show("1").value("state", "") == "RUNNING"; }, 10s);
          kill(pid, SIGINT);
        });
      });
  interrupter.join();
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_NE(r.err.find("tearing down job 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("job 1 CANCELLED"), std::string::npos) << r.err;
  EXPECT_EQ(d_.Show("1")["state"], "CANCELLED");
}

TEST_F(E2E, RankIgnoringSigtermIsKilledAfterGrace) {
  // Rank 0 fails only once rank 1 ignores SIGTERM (it says so in the file).
  const std::string ready = d_.dir() + "/ignoring";
  const std::string id =
      SubmitDetached({"--devices", "2", "--grace", "300ms", "--", kChild, "--rank", "0",
                      "waitfile:" + ready + ",exit:1", "ignore-term,pidfile:" + ready + ",hang"});
  nlohmann::json job = d_.WaitEnded(id);
  EXPECT_EQ(job["state"], "FAILED");
  EXPECT_EQ(job["ranks"][1]["signal"], SIGKILL);
}

TEST_F(E2E, DetachThenWaitAndAttach) {
  // The ranks print only once the attach is streaming (ltd logs that).
  const std::string go = d_.dir() + "/go";
  const std::string id =
      SubmitDetached({"--devices", "2", "--", kChild, "waitfile:" + go + ",print:3,exit:0"});
  CmdResult a;
  std::thread attach([&] { a = d_.Ctl({"attach", id}); });
  EXPECT_TRUE(WaitFor(
      [&] { return d_.log().find("job=" + id + " attach stream opened") != std::string::npos; },
      10s));
  std::ofstream(go).put('x');
  attach.join();
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_NE(a.out.find("[1] line 2 of 3"), std::string::npos) << a.out;
  CmdResult w = d_.Ctl({"wait", id});
  EXPECT_EQ(w.exit_code, 0);
  EXPECT_EQ(d_.Ctl({"attach", id}).exit_code, 0);  // an ended job: its outcome at once
}

TEST_F(E2E, LogsAllRanksOneRankTailAndFollow) {
  const std::string id =
      SubmitDetached({"--devices", "2", "--", kChild, "print:5,stderr:oops,exit:0"});
  d_.WaitEnded(id);
  CmdResult all = d_.Ctl({"logs", id});
  EXPECT_EQ(all.exit_code, 0);
  EXPECT_NE(all.out.find("[0] line 4 of 5\n"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("[1] oops\n"), std::string::npos) << all.out;
  CmdResult one = d_.Ctl({"logs", id, "--rank", "1"});
  EXPECT_EQ(one.out, "line 0 of 5\nline 1 of 5\nline 2 of 5\nline 3 of 5\nline 4 of 5\noops\n");
  CmdResult tail = d_.Ctl({"logs", id, "--rank", "0", "--tail", "2"});
  EXPECT_EQ(tail.out, "line 4 of 5\noops\n");
  CmdResult bad = d_.Ctl({"logs", id, "--rank", "7"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("out of range"), std::string::npos);

  const std::string live =
      SubmitDetached({"--devices", "1", "--", kChild, "print:2,sleep:500,print:1,exit:0"});
  CmdResult f = d_.Ctl({"logs", "-f", live});
  EXPECT_EQ(f.exit_code, 0);
  EXPECT_EQ(f.out, "[0] line 0 of 2\n[0] line 1 of 2\n[0] line 0 of 1\n");
}

TEST_F(E2E, FollowingLogsOfABusyJobLosesAndRepeatsNothing) {
  const std::string id =
      SubmitDetached({"--devices", "2", "--", kChild,
                      "print:4000,sleep:100,print:4000,sleep:100,print:4000,exit:0"});
  CmdResult f = d_.Ctl({"logs", "-f", id}, 60s);  // joins while the ranks print
  EXPECT_EQ(f.exit_code, 0);
  d_.WaitEnded(id);
  CmdResult all = d_.Ctl({"logs", id}, 60s);
  EXPECT_EQ(std::count(all.out.begin(), all.out.end(), '\n'), 24000);
  EXPECT_EQ(f.out.size(), all.out.size());
  EXPECT_TRUE(f.out == all.out);
}

TEST_F(E2E, PrintingALotKeepsEveryLineInTheLogAndOnTheAttachedClient) {
  CmdResult r = d_.Ctl({"submit", "--devices", "2", "--", kChild, "print:20000,exit:0"}, 60s);
  EXPECT_EQ(r.exit_code, 0);
  // Attached, a burst faster than the client reads makes it lag, reading
  // the job's log: it loses nothing.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 40000);
  EXPECT_EQ(r.err.find("dropped"), std::string::npos) << r.err;
  CmdResult logs = d_.Ctl({"logs", "1", "--rank", "1", "--tail", "1"});
  EXPECT_EQ(logs.out, "line 19999 of 20000\n");
  CmdResult all = d_.Ctl({"logs", "1"}, 60s);
  EXPECT_EQ(std::count(all.out.begin(), all.out.end(), '\n'), 40000);
}

TEST_F(E2E, RankClosingStdoutEarlyStillEndsCleanly) {
  CmdResult r =
      d_.Ctl({"submit", "--devices", "2", "--", kChild, "print:1,close-stdout,sleep:200,exit:0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(E2E, PsAndShowSurviveARestartAndRunningJobsBecomeLost) {
  SubmitDetached({"--devices", "1", "--name", "done", "--", kChild, "exit:0"});
  d_.WaitEnded("1");
  const std::string id = SubmitDetached({"--devices", "1", "--", kChild, "hang"});
  ASSERT_TRUE(WaitFor([&] { return d_.Show(id).value("state", "") == "RUNNING"; }, 10s));
  d_.KillHard();
  // With --restore-window 0 the job's supervisor ends it as soon as ltd is
  // gone, and the next ltd finds it LOST.
  EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(d_.marker()).empty(); }, 5s));
  ASSERT_TRUE(d_.Start());
  CmdResult ps = d_.Ctl({"ps", "-a"});
  EXPECT_NE(ps.out.find("SUCCEEDED"), std::string::npos) << ps.out;
  EXPECT_NE(ps.out.find("LOST"), std::string::npos) << ps.out;
  nlohmann::json lost = d_.Show(id);
  EXPECT_EQ(lost["state"], "LOST");
  EXPECT_EQ(lost["root_cause"]["reason"], "daemon_lost");
  EXPECT_EQ(d_.Show("done")["state"], "SUCCEEDED");
  // Ids are never handed out twice: a killed ltd may have reserved some
  // (next-id is written once per 64 submits), and the next one starts past
  // them.
  const std::string after_kill = SubmitDetached({"--devices", "1", "--", kChild, "exit:0"});
  EXPECT_GT(std::stoull(after_kill), 2u) << after_kill;
  EXPECT_LE(std::stoull(after_kill), 66u) << after_kill;
  d_.WaitEnded(after_kill);
  // A clean stop gives back what it reserved: ids go on one by one.
  ASSERT_EQ(d_.Stop(), 0);
  ASSERT_TRUE(d_.Start());
  EXPECT_EQ(SubmitDetached({"--devices", "1", "--", kChild, "exit:0"}),
            std::to_string(std::stoull(after_kill) + 1));
}

TEST_F(E2E, ClientDisconnectingMidStreamLeavesTheJobAlone) {
  // The job cannot end before the test creates `go`, so the attach is
  // still streaming when the harness kills it.
  const std::string go = d_.dir() + "/go";
  const std::string id =
      SubmitDetached({"--devices", "2", "--", kChild, "print:10,waitfile:" + go + ",exit:0"});
  CmdResult cut = d_.Ctl({"attach", id}, 300ms);  // killed by the harness mid-stream
  EXPECT_EQ(cut.exit_code, 128 + SIGKILL);
  EXPECT_EQ(d_.Show(id)["state"], "RUNNING");
  std::ofstream(go).put('x');
  nlohmann::json job = d_.WaitEnded(id);
  EXPECT_EQ(job["state"], "SUCCEEDED");
}

TEST_F(E2E, MasterPortsAreDistinctAcrossRunningJobs) {
  const std::string a = SubmitDetached({"--devices", "1", "--", kChild, "hang"});
  const std::string b = SubmitDetached({"--devices", "1", "--", kChild, "hang"});
  EXPECT_NE(d_.Show(a)["master_port"], d_.Show(b)["master_port"]);
  d_.Ctl({"kill", a});
  d_.Ctl({"kill", b});
  d_.WaitEnded(a);
  d_.WaitEnded(b);
}

TEST_F(E2E, JobsWaitForDevices) {
  const std::string go = d_.dir() + "/go";
  const std::string big =
      SubmitDetached({"--devices", "6", "--", kChild, "waitfile:" + go + ",exit:0"});
  const std::string next = SubmitDetached({"--devices", "4", "--", kChild, "exit:0"});
  EXPECT_EQ(d_.Show(next)["state"], "PENDING");  // 6 of 8 slots are taken until `go`
  std::ofstream(go).put('x');
  EXPECT_EQ(d_.WaitEnded(next)["state"], "SUCCEEDED");
  EXPECT_EQ(d_.Show(big)["state"], "SUCCEEDED");
}

// ---- bad input: a one-line error, exit 1, nothing changed ----

void ExpectOneLineError(const CmdResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST_F(E2E, BadDeviceCounts) {
  ExpectOneLineError(d_.Ctl({"submit", "--devices", "0", "--", kChild, "exit:0"}), "at least 1");
  ExpectOneLineError(d_.Ctl({"submit", "--devices", "99", "--", kChild, "exit:0"}),
                     "more than the 8");
  ExpectOneLineError(d_.Ctl({"submit", "--", kChild, "exit:0"}), "--devices is required");
  ExpectOneLineError(d_.Ctl({"submit", "--devices", "two", "--", kChild}), "--devices");
  EXPECT_EQ(d_.Ctl({"ps", "-a"}).out.find("\n1 "), std::string::npos);  // no job was made
}

TEST_F(E2E, MissingOrNonExecutableProgramFailsWithSpawnFailed) {
  CmdResult r = d_.Ctl({"submit", "--devices", "3", "--", "./no-such-program"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;
  nlohmann::json job = d_.Show("1");
  EXPECT_EQ(job["state"], "FAILED");
  EXPECT_EQ(job["root_cause"]["reason"], "spawn_failed");
  EXPECT_EQ(job["root_cause"]["exit_code"], 127);

  const std::string plain = d_.dir() + "/not-executable";
  std::ofstream(plain) << "data\n";
  chmod(plain.c_str(), 0644);
  CmdResult n = d_.Ctl({"submit", "--devices", "2", "--", plain});
  EXPECT_EQ(n.exit_code, 126);
  EXPECT_NE(n.err.find("Permission denied"), std::string::npos) << n.err;
}

TEST_F(E2E, ASecondLtdOnTheSameStateDirRefusesToStart) {
  const std::string id = SubmitDetached({"--devices", "1", "--", kChild, "hang"});
  ASSERT_TRUE(WaitFor([&] { return d_.Show(id).value("state", "") == "RUNNING"; }, 10s));
  const pid_t rank = d_.Show(id)["ranks"][0]["pid"];
  // Another socket, and even the first one's socket file gone: the state
  // dir alone decides.
  unlink(d_.socket().c_str());
  CmdResult second = RunCommand({LtdPath(), "--socket", d_.dir() + "/second.sock", "--state-dir",
                                 d_.state_dir(), "--devices", "2"},
                                {}, 30s);
  EXPECT_EQ(second.exit_code, 1) << second.err;
  EXPECT_NE(second.err.find("another ltd (pid " + std::to_string(d_.pid()) +
                            ") is using state dir " + d_.state_dir()),
            std::string::npos)
      << second.err;
  EXPECT_EQ(std::count(second.err.begin(), second.err.end(), '\n'), 1) << second.err;
  // The first ltd's job was not touched: its rank still runs under it.
  EXPECT_TRUE(ProcessAlive(rank));
}

// systemd may stop ltd the moment it starts: a SIGTERM that comes while
// ltd is still starting ends it cleanly (exit 0), never kills it.
TEST(LtdStart, ASigtermWhileStartingIsAStopNotAKill) {
  char tmpl[] = "/tmp/ltd-early.XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  for (int attempt = 0; attempt < 5; ++attempt) {
    const std::string socket = dir + "/s" + std::to_string(attempt);
    const pid_t pid = fork();
    if (pid == 0) {
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      dup2(null, 2);
      execl(LtdPath().c_str(), "ltd", "--socket", socket.c_str(), "--state-dir",
            (dir + "/state").c_str(), "--devices", "1", static_cast<char*>(nullptr));
      _exit(127);
    }
    // The socket file is the first sign of life: stop it right then.
    ASSERT_TRUE(WaitFor([&] { return access(socket.c_str(), F_OK) == 0; }, 30s));
    kill(pid, SIGTERM);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "wait status " << status;
  }
  std::filesystem::remove_all(dir);
}

TEST_F(E2E, UnknownAndAmbiguousJobs) {
  ExpectOneLineError(d_.Ctl({"show", "42"}), "no job '42'");
  SubmitDetached({"--devices", "1", "--name", "twin", "--", kChild, "exit:0"});
  d_.WaitEnded("1");
  SubmitDetached({"--devices", "1", "--name", "twin", "--", kChild, "hang"});
  // While one runs, the name is taken; the error names the job.
  ExpectOneLineError(d_.Ctl({"submit", "--devices", "1", "--name", "twin", "--", kChild, "exit:0"}),
                     "your job 2 (");
  EXPECT_EQ(d_.Ctl({"kill", "twin"}).exit_code, 0);  // the live one
  d_.WaitEnded("2");
  // Both finished: the newest.
  CmdResult shown = d_.Ctl({"--json", "show", "twin"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(nlohmann::json::parse(shown.out)["id"], "2");
  ExpectOneLineError(d_.Ctl({"kill", "nope"}), "no job 'nope'");
  ExpectOneLineError(d_.Ctl({"kill", "1"}), "already ended");
  ExpectOneLineError(
      d_.Ctl({"submit", "--devices", "1", "--heartbeat-timeout", "soon", "--", kChild, "exit:0"}),
      "not a duration");
  ExpectOneLineError(d_.Ctl({"kill", "--signal", "BOGUS", "1"}), "not a signal");
}

void ExpectOneLineError(const CmdResult& r, const std::string& needle);

// Users share the server: ranks run as the submitting user, and only the
// owner (or root) may control a job.
TEST_F(E2E, RanksRunAsTheSubmittingUserWhoAloneControlsTheJob) {
  if (geteuid() != 0 || !std::filesystem::exists("/usr/bin/setpriv"))
    GTEST_SKIP() << "needs root and setpriv";
  chmod(d_.dir().c_str(), 0755);  // mkdtemp made it 0700: let nobody reach the socket
  auto as_nobody = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                     "--clear-groups",   LtctlPath(),     "--socket",
                                     d_.socket()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, {d_.marker()}, 30s);
  };
  CmdResult mine = as_nobody(
      {"submit", "--devices", "2", "--", "/bin/sh", "-c", "echo uid=$(id -u) gid=$(id -g)"});
  EXPECT_EQ(mine.exit_code, 0) << mine.err;
  EXPECT_NE(mine.out.find("[1] uid=65534 gid=65534"), std::string::npos) << mine.out;
  EXPECT_EQ(d_.Show("1")["user"], "nobody");

  const std::string roots = SubmitDetached({"--devices", "1", "--", kChild, "hang"});
  // PENDING until its supervisor has started it (a moment on a busy machine).
  ASSERT_TRUE(WaitFor([&] { return d_.Show(roots)["state"] == "RUNNING"; }, 20s));
  CmdResult denied = as_nobody({"kill", roots});
  ExpectOneLineError(denied, "only its owner or root");
  EXPECT_EQ(d_.Show(roots)["state"], "RUNNING");
  EXPECT_NE(as_nobody({"logs", roots}).err.find("only its owner or root"), std::string::npos);
  EXPECT_EQ(as_nobody({"ps"}).exit_code, 0);      // everyone may look
  EXPECT_EQ(d_.Ctl({"logs", "1"}).exit_code, 0);  // root may read anyone's
  EXPECT_EQ(d_.Ctl({"kill", roots}).exit_code, 0);
  d_.WaitEnded(roots);
}

class E2EGpus : public E2E {
 protected:
  std::vector<std::string> DaemonArgs() override { return {"--gpus", "5,7,9"}; }
};

TEST_F(E2EGpus, JobsGetTheirGpusInCudaVisibleDevices) {
  CmdResult r = d_.Ctl({"submit", "--devices", "2", "--", kChild, "env"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[0] CUDA_VISIBLE_DEVICES=5,7\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1] CUDA_VISIBLE_DEVICES=5,7\n"), std::string::npos) << r.out;
  ExpectOneLineError(d_.Ctl({"submit", "--devices", "4", "--", kChild, "exit:0"}),
                     "more than the 3");
  // Two jobs at once share nothing.
  const std::string a = SubmitDetached({"--devices", "2", "--", kChild, "hang"});
  const std::string b = SubmitDetached({"--devices", "1", "--", kChild, "hang"});
  EXPECT_EQ(d_.Show(a)["cuda_visible_devices"], "5,7");
  EXPECT_EQ(d_.Show(b)["cuda_visible_devices"], "9");
  d_.Ctl({"kill", a});
  d_.Ctl({"kill", b});
  d_.WaitEnded(a);
  d_.WaitEnded(b);
}

TEST(E2ENoDaemon, LtctlSaysHowToStartLtd) {
  Daemon d;  // never started
  CmdResult r = d.Ctl({"ps"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot reach ltd at " + d.socket()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("start it with"), std::string::npos);
}

TEST(E2ENoDaemon, SocketPathTooLong) {
  const std::string long_path = "/tmp/" + std::string(120, 'x') + ".sock";
  CmdResult c = RunCommand({LtctlPath(), "--socket", long_path, "ps"}, {}, 10s);
  EXPECT_EQ(c.exit_code, 1);
  EXPECT_NE(c.err.find("longer than"), std::string::npos) << c.err;
  Daemon d;
  CmdResult l =
      RunCommand({LtdPath(), "--socket", long_path, "--state-dir", d.state_dir()}, {}, 10s);
  EXPECT_EQ(l.exit_code, 1);
  EXPECT_NE(l.err.find("choose a shorter --socket"), std::string::npos) << l.err;
}

TEST(E2ENoDaemon, UnwritableStateDirIsRefused) {
  Daemon d;
  const std::string file = d.dir() + "/a-file";
  std::ofstream(file) << "x";
  CmdResult l =
      RunCommand({LtdPath(), "--socket", d.socket(), "--state-dir", file + "/state"}, {}, 10s);
  EXPECT_EQ(l.exit_code, 1);
  EXPECT_NE(l.err.find("state dir"), std::string::npos) << l.err;
  EXPECT_FALSE(std::filesystem::exists(d.socket()));
}

TEST_F(E2E, GarbageOnTheSocketHarmsNothing) {
  const std::string id = SubmitDetached({"--devices", "1", "--", kChild, "hang"});
  ASSERT_TRUE(WaitFor([&] { return d_.Show(id)["state"] == "RUNNING"; }, 20s));
  std::mt19937 rng(7);
  for (int conn = 0; conn < 20; ++conn) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, d_.socket().c_str(), sizeof addr.sun_path - 1);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    std::string junk(1 + rng() % 65536, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    if (conn % 2 == 0)
      junk.replace(0, 24, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");  // a preface, then junk
    (void)!write(fd, junk.data(), junk.size());
    close(fd);
  }
  EXPECT_EQ(d_.Ctl({"ps"}).exit_code, 0);
  EXPECT_EQ(d_.Show(id)["state"], "RUNNING");
  d_.Ctl({"kill", id});
  d_.WaitEnded(id);
}

TEST_F(E2E, SecondLtdOnTheSameSocketIsRefused) {
  Daemon other;
  CmdResult second =
      RunCommand({LtdPath(), "--socket", d_.socket(), "--state-dir", other.state_dir()}, {}, 10s);
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("another ltd is already listening"), std::string::npos) << second.err;
  EXPECT_EQ(d_.Ctl({"ps"}).exit_code, 0);  // the first keeps running
}

// A killed ltd's listening socket and state lock outlive it while a child
// it was starting has not yet reached its exec: the next ltd, started
// right after the SIGKILL, waits that out (up to a second) rather than
// take them for another ltd's and refuse to start.
TEST_F(E2E, ASocketAndLockThatADeadLtdsChildHoldsAMomentLongerAreTakenOver) {
  Daemon other;
  std::filesystem::create_directories(other.state_dir());
  // What the child holds: the lock, and the socket, listening.
  const int lock =
      open((other.state_dir() + "/ltd.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(flock(lock, LOCK_EX), 0);
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, other.socket().c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 8), 0);
  std::atomic<pid_t> ltd{0};
  std::future<CmdResult> run = std::async(std::launch::async, [&] {
    return RunCommand({LtdPath(), "--socket", other.socket(), "--state-dir", other.state_dir(),
                       "--devices", "1", "--restore-window", "0"},
                      {}, 60s, [&](pid_t pid) { ltd = pid; });
  });
  std::this_thread::sleep_for(300ms);
  close(lock);  // the child has reached its exec
  // Once ltd has found the socket answering, it goes too.
  pollfd probed{listener, POLLIN, 0};
  EXPECT_EQ(poll(&probed, 1, 20000), 1) << "ltd never tried the socket";
  close(listener);
  EXPECT_TRUE(WaitFor([&] { return other.Ctl({"ps"}).exit_code == 0; }, 20s));
  if (ltd > 0) kill(ltd, SIGTERM);
  CmdResult r = run.get();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(Has(r.err, "another ltd")) << r.err;
}

TEST_F(E2E, SigtermToLtdWithNoRestoreWindowTearsJobsDownAndRecordsThem) {
  const std::string id = SubmitDetached({"--devices", "2", "--", kChild, "hang"});
  ASSERT_TRUE(WaitFor([&] { return d_.Show(id).value("state", "") == "RUNNING"; }, 10s));
  EXPECT_EQ(d_.Stop(), 0);
  ASSERT_TRUE(d_.Start());
  nlohmann::json job = d_.Show(id);
  EXPECT_EQ(job["state"], "CANCELLED");
  EXPECT_EQ(job["root_cause"]["message"], "ltd shut down");
}

// --time: torn down once it ran that long, as timeout(1) exits; ps shows
// what is left of a running job's time.
TEST_F(E2E, TheTimeLimitEndsTheJobWith124AndPsShowsTheTimeLeft) {
  const std::string id = SubmitDetached({"--devices", "1", "--time", "1h", "--", kChild, "hang"});
  ASSERT_TRUE(WaitFor([&] { return d_.Show(id)["state"] == "RUNNING"; }, 10s));
  CmdResult ps = d_.Ctl({"ps"});
  // "1h00m left" at once, "59m59s left" a second later (a slow machine's).
  EXPECT_TRUE(Has(ps.out, "(1h00m left)") || Has(ps.out, "(59m")) << ps.out;
  EXPECT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  d_.WaitEnded(id, 10s);
  CmdResult r = d_.Ctl({"submit", "--devices", "2", "--time", "300ms", "--", kChild, "hang"}, 30s);
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_TRUE(Has(r.err, "time limit of 300ms")) << r.err;
  nlohmann::json job = d_.Show("2");
  EXPECT_EQ(job["root_cause"]["reason"], "time_limit");
  EXPECT_EQ(job["state"], "TIMEOUT");
  EXPECT_EQ(job["exit_code"], 124);
  // ps, its filter, and the metrics name it so too.
  EXPECT_TRUE(Has(d_.Ctl({"ps", "-a"}).out, "TIMEOUT")) << d_.Ctl({"ps", "-a"}).out;
  EXPECT_TRUE(Has(d_.Ctl({"ps", "--state", "timeout"}).out, "TIMEOUT"));
}

class E2EMaxTime : public E2E {
 protected:
  std::vector<std::string> DaemonArgs() override { return {"--max-time", "1h"}; }
};

// As Slurm's MaxTime: a longer --time is refused in one line; no --time
// gets the cap.
TEST_F(E2EMaxTime, ALongerTimeIsRefusedAndNoneGetsTheCap) {
  ExpectOneLineError(d_.Ctl({"submit", "--devices", "1", "--time", "2h", "--", kChild, "hang"}),
                     "--time 2h is more than this ltd's --max-time 1h; ask for at most that");
  const std::string id = SubmitDetached({"--devices", "1", "--", kChild, "hang"});
  EXPECT_EQ(d_.Show(id)["time_limit_ms"], 3600000);
  EXPECT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  d_.WaitEnded(id, 10s);
}

}  // namespace
}  // namespace ltd::test
