// An attached client reads its job's log: every line of every rank reaches
// it once, in each rank's order, on a busy machine, through a client that
// stops reading for a while, through a SIGKILL and restart of ltd, and up
// to a crash's last line before the job's end.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "e2e_fixture.h"

namespace ltd::test {
namespace {

const std::string kChild = TestChildPath();

// Whether `out` holds, for each of `ranks`, the lines "[R] line I of N" of
// `batches` (each a `print:N`, in order), each once and in order; "" if
// so, else what is wrong first.
std::string EveryLineOnce(const std::string& out, int ranks, const std::vector<long>& batches) {
  std::map<int, std::pair<size_t, long>> next;  // rank -> (batch, line)
  std::istringstream in(out);
  long count = 0;
  for (std::string line; std::getline(in, line);) {
    int rank = -1;
    long i = -1, n = -1;
    if (std::sscanf(line.c_str(), "[%d] line %ld of %ld", &rank, &i, &n) != 3) continue;
    auto& [batch, want] = next[rank];
    if (rank < 0 || rank >= ranks || batch >= batches.size() || n != batches[batch] || i != want) {
      return "line " + std::to_string(count) + " is '" + line + "', rank " + std::to_string(rank) +
             " was at line " + std::to_string(want) + " of batch " + std::to_string(batch);
    }
    if (++want == n) {
      ++batch;
      want = 0;
    }
    ++count;
  }
  for (int r = 0; r < ranks; ++r) {
    if (next[r].first != batches.size()) {
      return "rank " + std::to_string(r) + " stopped at line " + std::to_string(next[r].second) +
             " of batch " + std::to_string(next[r].first) + " (" + std::to_string(count) +
             " lines in all)";
    }
  }
  return "";
}

class AttachStream : public E2E {
 protected:
  // Jobs outlive a killed ltd (one test kills it); every job here ends by
  // itself before the test does.
  std::vector<std::string> DaemonArgs() override { return {"--restore-window", "10m"}; }
  void TearDown() override {
    for (pid_t pid : hogs_) kill(pid, SIGKILL);
    for (pid_t pid : hogs_) waitpid(pid, nullptr, 0);
    E2E::TearDown();
  }

  // Two processes that spin for the test's length: a machine as busy as
  // one with a training job beside the one watched.
  void StartHogs() {
    for (int i = 0; i < 2; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        execl("/bin/sh", "sh", "-c", "while :; do :; done", static_cast<char*>(nullptr));
        _exit(127);
      }
      hogs_.push_back(pid);
    }
  }

  // `ltctl ARGS >out 2>err` in the background.
  pid_t Spawn(const std::vector<std::string>& args, const std::string& out,
              const std::string& err) const {
    std::vector<std::string> argv = {LtctlPath(), "--socket", d_.socket()};
    argv.insert(argv.end(), args.begin(), args.end());
    const pid_t pid = fork();
    if (pid == 0) {
      const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0) _exit(127);
      setenv(d_.marker().substr(0, d_.marker().find('=')).c_str(),
             d_.marker().substr(d_.marker().find('=') + 1).c_str(), 1);
      std::vector<char*> cargv;
      for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
      cargv.push_back(nullptr);
      execv(cargv[0], cargv.data());
      _exit(127);
    }
    return pid;
  }

  // Its exit code; killed (137) past the deadline.
  static int Reap(pid_t pid, std::chrono::milliseconds deadline = 240s) {
    int status = 0;
    const bool exited = WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; }, deadline);
    if (!exited) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  static off_t SizeOf(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 ? st.st_size : 0;
  }

  std::vector<pid_t> hogs_;
};

TEST_F(AttachStream, EveryLineOfEveryRankReachesAnAttachedSubmitOnABusyMachine) {
  StartHogs();
  const std::string out = d_.dir() + "/out", err = d_.dir() + "/err";
  const pid_t pid = Spawn({"submit", "--devices", "4", "--", kChild, "print:200000"}, out, err);
  EXPECT_EQ(Reap(pid), 0) << ReadWhole(err);
  EXPECT_EQ(EveryLineOnce(ReadWhole(out), 4, {200000}), "");
  EXPECT_FALSE(Has(ReadWhole(err), "dropped")) << ReadWhole(err);
}

TEST_F(AttachStream, AClientStoppedForFiveSecondsStillGetsEveryLine) {
  StartHogs();
  const std::string out = d_.dir() + "/out", err = d_.dir() + "/err";
  const pid_t pid = Spawn({"submit", "--devices", "4", "--", kChild, "print:200000"}, out, err);
  ASSERT_TRUE(WaitFor([&] { return SizeOf(out) > 64 * 1024; }, 60s)) << ReadWhole(err);
  kill(pid, SIGSTOP);
  // Stopped as by ^Z or a pager that does not read: its queue in ltd
  // fills, the job goes on.
  std::this_thread::sleep_for(5s);
  kill(pid, SIGCONT);
  EXPECT_EQ(Reap(pid), 0) << ReadWhole(err);
  EXPECT_EQ(EveryLineOnce(ReadWhole(out), 4, {200000}), "");
  EXPECT_FALSE(Has(ReadWhole(err), "dropped")) << ReadWhole(err);
}

// The job prints a batch, waits while ltd is SIGKILLed, prints another
// while ltd is down, and ends after ltd is back: the client goes on from
// the last line it printed.
TEST_F(AttachStream, AnAttachGoesOnThroughAKilledLtdWithoutAGapOrARepeat) {
  const std::string go = d_.dir() + "/GO";
  const std::string out = d_.dir() + "/out", err = d_.dir() + "/err";
  const pid_t pid = Spawn(
      {"submit", "--devices", "2", "--", kChild, "print:20000,waitfile:" + go + ",print:30000"},
      out, err);
  ASSERT_TRUE(WaitFor([&] { return SizeOf(out) > 1000; }, 30s)) << ReadWhole(err);
  d_.KillHard();
  std::ofstream(go).close();
  ASSERT_TRUE(WaitFor([&] { return Has(ReadWhole(err), "waiting for it to come back"); }, 10s))
      << ReadWhole(err);
  ASSERT_TRUE(d_.Start(DaemonArgs())) << d_.log();
  EXPECT_EQ(Reap(pid), 0) << ReadWhole(err);
  EXPECT_EQ(EveryLineOnce(ReadWhole(out), 2, {20000, 30000}), "");
  const std::string e = ReadWhole(err);
  EXPECT_TRUE(Has(e, "ltd is back")) << e;
  EXPECT_FALSE(Has(e, "Socket closed") || Has(e, "Cancelling")) << e;
}

// A job that prints a lot and crashes while its client is stopped: the
// client, reading again, prints every line and the traceback before it
// says how the job ended and exits with its code.
TEST_F(AttachStream, ACrashsTracebackReachesAClientThatWasStopped) {
  const std::string out = d_.dir() + "/out", err = d_.dir() + "/err";
  const std::string code =
      "import sys\n"
      "for i in range(100000): print('n', i)\n"
      "sys.stdout.flush()\n"
      "raise RuntimeError('the end of the story')\n";
  const pid_t pid =
      Spawn({"submit", "--name", "crash", "--devices", "1", "--", "python3", "-c", code}, out, err);
  ASSERT_TRUE(WaitFor([&] { return SizeOf(out) > 0; }, 30s)) << ReadWhole(err);
  kill(pid, SIGSTOP);
  nlohmann::json job = d_.WaitEnded("crash", 60s);
  kill(pid, SIGCONT);
  EXPECT_EQ(job["state"], "FAILED") << job.dump(2);
  EXPECT_EQ(Reap(pid), 1) << ReadWhole(err);
  const std::string o = ReadWhole(out), e = ReadWhole(err);
  EXPECT_TRUE(Has(o, "[0] n 99999\n")) << o.substr(o.size() > 500 ? o.size() - 500 : 0);
  const size_t traceback = e.find("[0] RuntimeError: the end of the story");
  const size_t end = e.find("ltctl: job ");
  EXPECT_NE(traceback, std::string::npos) << e;
  EXPECT_NE(end, std::string::npos) << e;
  EXPECT_LT(traceback, end) << e;
  EXPECT_EQ(std::count(o.begin(), o.end(), '\n'), 100000);
}

}  // namespace
}  // namespace ltd::test
