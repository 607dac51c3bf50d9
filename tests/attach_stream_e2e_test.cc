// An attached client reads its job's log: every line of every rank reaches
// it once, in each rank's order, on a busy machine, through a client that
// stops reading for a while, through a SIGKILL and restart of ltd, and up
// to a crash's last line before the job's end. `logs -f` (with a tail too)
// goes on through a restart of ltd from the last line it printed, is told
// what the log cut meanwhile, and says so in one line when the log it read
// was replaced.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "e2e_fixture.h"
#include "ltd.grpc.pb.h"

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

  static size_t LinesOf(const std::string& path) {
    const std::string text = ReadWhole(path);
    return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  }

  // Kills ltd hard and lets the job go on (`go` appears) while it is down;
  // back once the client `err` says it waits for it.
  void RestartLtdUnder(const std::string& go, const std::string& err,
                       const std::function<void()>& meanwhile = {}) {
    d_.KillHard();
    std::ofstream(go).close();
    ASSERT_TRUE(WaitFor([&] { return Has(ReadWhole(err), "waiting for it to come back"); }, 10s))
        << ReadWhole(err);
    if (meanwhile) {
      ASSERT_NO_FATAL_FAILURE(meanwhile());
    }
    ASSERT_TRUE(d_.Start(DaemonArgs())) << d_.log();
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

// An attached submit's stream, read as any client would: its first event
// is the job's id with where the stream starts in the job's log (one event,
// not an id and then a position), and every event after it is the job's:
// its start, its lines, its end.
TEST_F(AttachStream, AnAttachedSubmitsFirstEventSaysWhereItsLogStarts) {
  auto api = v1::Ltd::NewStub(
      grpc::CreateChannel("unix:" + d_.socket(), grpc::InsecureChannelCredentials()));
  for (const std::string program : {"exit:0", "print:3"}) {
    v1::SubmitRequest req;
    req.set_devices(1);
    req.add_argv(kChild);
    req.add_argv(program);
    req.set_cwd("/");
    req.add_env(d_.marker());
    req.set_batched(true);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 60s);
    auto reader = api->Submit(&ctx, req);
    std::vector<v1::JobEvent> events;
    for (v1::JobEvent ev; reader->Read(&ev);) events.push_back(ev);
    ASSERT_TRUE(reader->Finish().ok()) << program;
    ASSERT_GE(events.size(), 3u) << program;
    EXPECT_TRUE(events[0].has_accepted()) << program;
    EXPECT_TRUE(events[0].has_at()) << program;
    EXPECT_EQ(events[0].at().offset(), 0u) << program;
    int lines = 0;
    for (size_t i = 1; i < events.size(); ++i) {
      const v1::JobEvent& ev = events[i];
      EXPECT_NE(ev.event_case(), v1::JobEvent::EVENT_NOT_SET)
          << program << ": event " << i << " says only where the stream is";
      if (ev.has_lines()) lines += ev.lines().lines_size();
    }
    EXPECT_TRUE(events[1].has_started()) << program;
    EXPECT_TRUE(events.back().has_ended()) << program;
    EXPECT_EQ(events.back().ended().exit_code(), 0) << program;
    EXPECT_EQ(lines, program == "exit:0" ? 0 : 3) << program;
  }
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

// `logs -f` through a SIGKILL of ltd while the job prints on: every line
// once, in each rank's order.
TEST_F(AttachStream, LogsFollowGoesOnThroughAKilledLtdWithoutAGapOrARepeat) {
  const std::string go = d_.dir() + "/GO";
  const std::string out = d_.dir() + "/out", err = d_.dir() + "/err";
  const std::string id = SubmitDetached(
      {"--devices", "2", "--", kChild, "print:20000,waitfile:" + go + ",print:30000"});
  const pid_t pid = Spawn({"logs", "-f", id}, out, err);
  ASSERT_TRUE(WaitFor([&] { return SizeOf(out) > 1000; }, 30s)) << ReadWhole(err);
  ASSERT_NO_FATAL_FAILURE(RestartLtdUnder(go, err));
  EXPECT_EQ(Reap(pid), 0) << ReadWhole(err);
  EXPECT_EQ(EveryLineOnce(ReadWhole(out), 2, {20000, 30000}), "");
  const std::string e = ReadWhole(err);
  EXPECT_TRUE(Has(e, "ltd is back; following the log of job " + id + " again")) << e;
  EXPECT_EQ(d_.WaitEnded(id)["state"], "SUCCEEDED");
}

// `logs --tail 5 -f`: the last 5 lines, then, through a SIGKILL of ltd,
// every line after them once.
TEST_F(AttachStream, LogsTailFollowGoesOnThroughAKilledLtd) {
  const std::string go = d_.dir() + "/GO";
  const std::string out = d_.dir() + "/out", err = d_.dir() + "/err";
  const std::string id = SubmitDetached(
      {"--devices", "2", "--", kChild, "print:20000,waitfile:" + go + ",print:30000"});
  // The first batch is whole in the log: its last 5 lines are known.
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const char* rank : {"0", "1"}) {
          if (d_.Ctl({"logs", "--rank", rank, "--tail", "1", id}).out != "line 19999 of 20000\n")
            return false;
        }
        return true;
      },
      60s));
  const std::string last5 = d_.Ctl({"logs", "--tail", "5", id}).out;
  const pid_t pid = Spawn({"logs", "--tail", "5", "-f", id}, out, err);
  ASSERT_TRUE(WaitFor([&] { return LinesOf(out) == 5; }, 30s)) << ReadWhole(err);
  ASSERT_NO_FATAL_FAILURE(RestartLtdUnder(go, err));
  EXPECT_EQ(Reap(pid), 0) << ReadWhole(err);
  const std::string o = ReadWhole(out);
  size_t fifth = 0;
  for (int i = 0; i < 5 && fifth != std::string::npos; ++i) fifth = o.find('\n', fifth) + 1;
  EXPECT_EQ(o.substr(0, fifth), last5);
  EXPECT_EQ(EveryLineOnce(o.substr(fifth), 2, {30000}), "");
  EXPECT_TRUE(Has(ReadWhole(err), "ltd is back; following the log of job " + id + " again"))
      << ReadWhole(err);
}

// The job's log cut its middle, where a `logs -f` was, while ltd was down:
// the client goes on at the tail, told how many bytes it missed there,
// and `logs` tells the lines of the whole cut.
TEST_F(AttachStream, LogsFollowResumedInsideTheCutIsToldWhatItMissed) {
  d_.Stop();
  ASSERT_TRUE(d_.Start({"--restore-window", "10m", "--job-max-log-bytes", "1M"})) << d_.log();
  const std::string go = d_.dir() + "/GO";
  const std::string out = d_.dir() + "/out", err = d_.dir() + "/err";
  // ~620 KB stored: past the log's head (half the budget), nothing cut yet.
  const std::string id = SubmitDetached(
      {"--devices", "2", "--", kChild, "print:6000,waitfile:" + go + ",print:40000"});
  const pid_t pid = Spawn({"logs", "-f", id}, out, err);
  ASSERT_TRUE(WaitFor([&] { return LinesOf(out) == 12000; }, 60s)) << ReadWhole(err);
  ASSERT_NO_FATAL_FAILURE(RestartLtdUnder(go, err, [&] {
    // The second batch cuts the log where the client was.
    const std::string cut = d_.state_dir() + "/jobs/" + id + "/log.cut";
    ASSERT_TRUE(WaitFor([&] { return SizeOf(cut) > 0; }, 60s));
  }));
  EXPECT_EQ(Reap(pid), 0) << ReadWhole(err);
  std::istringstream in(ReadWhole(out));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_GT(lines.size(), 12001u);
  std::string first;
  for (size_t i = 0; i < 12000; ++i) first += lines[i] + "\n";
  EXPECT_EQ(EveryLineOnce(first, 2, {6000}), "");
  ASSERT_TRUE(lines[12000].starts_with("[ltd] ")) << lines[12000];
  // Then each rank's lines on to its last, in order, none twice (a rank
  // may have none left); a line is missing only where a marker says the
  // log cut it (where the client was, and again should the log's cut
  // overtake it as it reads): as stored ("TIME [R] line I of N", TIME 28
  // bytes), the lines missing add up to the bytes the markers said.
  unsigned long long said = 0, missing = 0;
  std::map<int, long> next = {{0, 0}, {1, 0}};  // rank -> line
  auto skip = [&](int rank, long to) {
    for (; next[rank] < to; ++next[rank]) {
      missing +=
          28 + ("[" + std::to_string(rank) + "] line " + std::to_string(next[rank]) + " of 40000\n")
                   .size();
    }
  };
  for (size_t i = 12000; i < lines.size(); ++i) {
    unsigned long long bytes = 0, cut_lines = 0;
    if (std::sscanf(lines[i].c_str(), "[ltd] %llu bytes of output cut here", &bytes) == 1 ||
        std::sscanf(lines[i].c_str(), "[ltd] %llu lines (%llu bytes) of output cut here",
                    &cut_lines, &bytes) == 2) {
      said += bytes;
      continue;
    }
    int rank = -1;
    long n = -1, of = -1;
    ASSERT_EQ(std::sscanf(lines[i].c_str(), "[%d] line %ld of %ld", &rank, &n, &of), 3)
        << i << ": " << lines[i];
    ASSERT_TRUE(of == 40000 && (rank == 0 || rank == 1)) << lines[i];
    ASSERT_GE(n, next[rank]) << i << ": " << lines[i];
    skip(rank, n);
    next[rank] = n + 1;
  }
  skip(0, 40000);
  skip(1, 40000);
  EXPECT_EQ(said, missing);
  // The whole log says how many lines it dropped.
  EXPECT_EQ(d_.WaitEnded(id)["state"], "SUCCEEDED");
  const std::string all = d_.Ctl({"logs", id}).out;
  const size_t marker = all.find("\n[ltd] ");
  ASSERT_NE(marker, std::string::npos);
  unsigned long long cut_lines = 0, cut_bytes = 0;
  ASSERT_EQ(std::sscanf(all.c_str() + marker + 1,
                        "[ltd] %llu lines (%llu bytes) of output cut here", &cut_lines, &cut_bytes),
            2)
      << all.substr(marker, 200);
  EXPECT_EQ(cut_lines + std::count(all.begin(), all.end(), '\n') - 1, 2u * (6000 + 40000));
}

// The log a `logs -f` read was replaced while ltd was down (a state dir
// put back from a copy, say): one line says so; nothing of another log is
// printed as if it went on.
TEST_F(AttachStream, LogsFollowOfALogReplacedMeanwhileSaysSoInOneLine) {
  const std::string go = d_.dir() + "/GO";
  const std::string out = d_.dir() + "/out", err = d_.dir() + "/err";
  const std::string id =
      SubmitDetached({"--devices", "1", "--", kChild, "print:10,waitfile:" + go + ",exit:0"});
  const pid_t pid = Spawn({"logs", "-f", id}, out, err);
  ASSERT_TRUE(WaitFor([&] { return LinesOf(out) == 10; }, 30s)) << ReadWhole(err);
  ASSERT_NO_FATAL_FAILURE(RestartLtdUnder(go, err, [&] {
    const std::string head = d_.state_dir() + "/jobs/" + id + "/log.head";
    std::ofstream(head + ".copy") << ReadWhole(head);
    ASSERT_EQ(rename((head + ".copy").c_str(), head.c_str()), 0);
  }));
  EXPECT_EQ(Reap(pid, 60s), 1) << ReadWhole(err);
  EXPECT_EQ(ReadWhole(err),
            "ltctl: lost ltd (it stopped or restarted); waiting for it to come back\n"
            "ltctl: job " +
                id +
                "'s log is not the one this client was reading (it was "
                "replaced); `ltctl logs " +
                id + "` shows what it has\n");
  EXPECT_EQ(LinesOf(out), 10u);
  d_.WaitEnded(id);
}

// One rank's few lines in a long log of another's: ltd reads the log a
// budget at a time in the pool every reader shares (an empty read hands
// the thread back), and the reader gets exactly that rank's lines, from
// the start, from a tail found backwards, and followed to the job's end.
TEST_F(AttachStream, ARanksFewLinesInALongLogComeWholeThroughBudgetedReads) {
  const std::string id =
      SubmitDetached({"--devices", "2", "--", kChild, "--rank", "1", "print:3", "print:300000"});
  EXPECT_EQ(d_.WaitEnded(id, 60s)["state"], "SUCCEEDED");
  const std::string three = "line 0 of 3\nline 1 of 3\nline 2 of 3\n";
  CmdResult all = d_.Ctl({"logs", "--rank", "1", id});
  EXPECT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(all.out, three);
  EXPECT_EQ(d_.Ctl({"logs", "--rank", "1", "--tail", "2", id}).out, "line 1 of 3\nline 2 of 3\n");
  CmdResult followed = d_.Ctl({"logs", "-f", "--rank", "1", "--tail", "5", id});
  EXPECT_EQ(followed.exit_code, 0) << followed.err;
  EXPECT_EQ(followed.out, three);
  EXPECT_EQ(d_.Ctl({"logs", "--rank", "0", "--tail", "1", id}).out, "line 299999 of 300000\n");
  // Long enough to take several budgets each way.
  EXPECT_GT(SizeOf(d_.state_dir() + "/jobs/" + id + "/log.head"), 3 << 20);
}

}  // namespace
}  // namespace ltd::test
