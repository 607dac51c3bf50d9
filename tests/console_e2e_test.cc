// What an attached ltctl and ltrun tell their user, end to end: output is
// live in a pipe (the first line is read before the rank writes the
// second), stdout and stderr keep their order through `2>&1`, a job that
// waits for devices says so, a signal goes to each rank's main process,
// and a cancelled job says who cancelled it.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "e2e_fixture.h"

namespace ltd::test {
namespace {

const std::string kChild = TestChildPath();

std::string LtrunPath() { return LtdPath().substr(0, LtdPath().rfind('/')) + "/ltrun"; }

// Single-quoted for sh.
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A rank's actions that print a line to stdout, wait for `dir`/go1, print
// one to stderr, wait for `dir`/go2, and print a last one. The shell
// reading the pipe creates go1 only once it has read the first line, so a
// writer that holds its output back until the job ends never gets there.
std::string Handshake(const std::string& dir) {
  return "print:1,waitfile:" + dir + "/go1,stderr:second,waitfile:" + dir + "/go2,print:1";
}

// Reads the next line into a instead when a is an attached submit's first
// line, "ltd: job N (NAME)".
constexpr const char* kSkipJobLine = "case $a in 'ltd: job '*) IFS= read -r a;; esac;";

// `command 2>&1 | reader`, where the reader takes two lines, releasing the
// rank after each, then copies the rest. Its output: "1:LINE", "2:LINE",
// then the rest as it came.
std::vector<std::string> ThroughPipe(const std::string& command, const std::string& dir,
                                     const std::string& marker) {
  // An attached submit's first line names its job ("ltd: job N"): the
  // rank's lines come after it.
  const std::string script =
      "{ " + command + "; } 2>&1 | { IFS= read -r a; " + kSkipJobLine + " echo \"1:$a\"; : > " +
      Quote(dir) + "/go1; IFS= read -r b; echo \"2:$b\"; : > " + Quote(dir) + "/go2; cat; }";
  CmdResult r = RunCommand({"/bin/sh", "-c", script}, {marker}, 30s);
  EXPECT_EQ(r.exit_code, 0) << "the reader never saw the first lines as they were written "
                               "(held in a buffer until the job ended?)\n"
                            << r.out << r.err;
  std::vector<std::string> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

const std::vector<std::string> kLive = {"1:[0] line 0 of 1", "2:[0] second", "[0] line 0 of 1"};

class Console : public E2E {
 protected:
  std::string Ltctl() const { return Quote(LtctlPath()) + " --socket " + Quote(d_.socket()); }
  std::string Dir() {
    std::string dir = d_.dir() + "/hs" + std::to_string(++handshakes_);
    std::filesystem::create_directories(dir);
    return dir;
  }
  int handshakes_ = 0;
};

TEST_F(Console, AnAttachedSubmitIsLiveInAPipeAndKeepsStdoutAndStderrInOrder) {
  const std::string dir = Dir();
  auto lines =
      ThroughPipe(Ltctl() + " submit --devices 1 -- " + Quote(kChild) + " " + Quote(Handshake(dir)),
                  dir, d_.marker());
  EXPECT_EQ(lines, kLive);
}

// An attach shows the lines written once it is open (the log has the
// earlier ones): the rank waits for go0 until ltd's debug log (the
// harness runs ltd at debug) says the attach's output flows.
TEST_F(Console, AttachIsLiveInAPipe) {
  const std::string dir = Dir();
  const std::string id = SubmitDetached(
      {"--devices", "1", "--", kChild, "waitfile:" + dir + "/go0," + Handshake(dir)});
  std::vector<std::string> lines;
  std::thread reader([&] { lines = ThroughPipe(Ltctl() + " attach " + id, dir, d_.marker()); });
  const bool opened = WaitFor(
      [&] { return d_.log().find("job=" + id + " attach stream opened") != std::string::npos; },
      20s);
  std::ofstream(dir + "/go0").flush();  // released either way, so the reader ends
  reader.join();
  ASSERT_TRUE(opened) << d_.log();
  EXPECT_EQ(lines, kLive);
  EXPECT_EQ(d_.WaitEnded(id)["state"], "SUCCEEDED");
}

TEST_F(Console, LogsFollowIsLiveInAPipe) {
  const std::string dir = Dir();
  const std::string id = SubmitDetached({"--devices", "1", "--", kChild, Handshake(dir)});
  auto lines = ThroughPipe(Ltctl() + " logs -f " + id, dir, d_.marker());
  EXPECT_EQ(lines, kLive);
}

// Python block-buffers a pipe; the ranks ltd instruments get line-buffered
// streams, so a plain print() is live too.
TEST_F(Console, AnInstrumentedPythonRanksPrintsAreLive) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  const std::string dir = Dir();
  const std::string script =
      "import os, sys, time\n"
      "def wait(name):\n"
      "    while not os.path.exists(os.path.join(sys.argv[1], name)): time.sleep(0.005)\n"
      "print('line 0 of 1'); wait('go1')\n"
      "print('second', file=sys.stderr); wait('go2')\n"
      "print('line 0 of 1')\n";
  // As a user would have it (this machine's environment may set it).
  auto lines = ThroughPipe("env -u PYTHONUNBUFFERED " + Ltctl() +
                               " submit --devices 1 -- /usr/bin/python3 -c " + Quote(script) + " " +
                               Quote(dir),
                           dir, d_.marker());
  EXPECT_EQ(lines, kLive);
}

TEST(LtrunConsole, LtrunIsLiveInAPipe) {
  if (geteuid() != 0) GTEST_SKIP() << "ltrun's cgroup mode needs root here";
  char tmpl[] = "/tmp/ltrun-console.XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string marker = "LT_TEST_TAG=" + dir;
  auto lines = ThroughPipe(Quote(LtrunPath()) + " --containment cgroup --devices 1 -- " +
                               Quote(kChild) + " " + Quote(Handshake(dir)),
                           dir, marker);
  EXPECT_EQ(lines, kLive);
  EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(marker).empty(); }, 5s));
  for (pid_t pid : ProcessesWithMarker(marker)) kill(pid, SIGKILL);
  std::filesystem::remove_all(dir);
}

class OneSlot : public Console {
 protected:
  std::vector<std::string> DaemonArgs() override { return {"--devices", "1"}; }
};

TEST_F(OneSlot, AnAttachedSubmitSaysAtOnceThatItWaitsAndWhenItStarts) {
  const std::string holder = SubmitDetached({"--devices", "1", "--", kChild, "hang"});
  ASSERT_TRUE(WaitFor([&] { return d_.Show(holder)["state"] == "RUNNING"; }, 20s));
  // The reader sees the PENDING line while the first job still holds the
  // slot, then frees it, then sees the start.
  const std::string script =
      Ltctl() + " submit --devices 1 -- " + Quote(kChild) + " exit:0 2>&1 | { IFS= read -r a; " +
      kSkipJobLine + " echo \"1:$a\"; " + Ltctl() + " kill " + holder + " >/dev/null; cat; }";
  CmdResult r = RunCommand({"/bin/sh", "-c", script}, {d_.marker()}, 30s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("1:ltctl: job 2 is PENDING (needs 1 device"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("; waiting\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ltctl: job 2 started\n"), std::string::npos) << r.out;
  EXPECT_EQ(d_.WaitEnded("2")["state"], "SUCCEEDED");
}

std::vector<pid_t> PidsIn(const std::string& path) {
  std::vector<pid_t> pids;
  std::ifstream in(path);
  for (pid_t pid; in >> pid;) pids.push_back(pid);
  std::sort(pids.begin(), pids.end());
  return pids;
}

TEST_F(Console, ASignalGoesToEachRanksMainProcessUnlessAllProcessesIsAsked) {
  const std::string usr1 = d_.dir() + "/usr1", pids = d_.dir() + "/pids";
  // Each rank: a handler that logs SIGUSR1, its pid, then a worker (which
  // inherits the handler), then waits.
  const std::string id = SubmitDetached(
      {"--devices", "2", "--", kChild, "usr1log:" + usr1 + ",pidfile:" + pids + ",fork:1,hang"});
  ASSERT_TRUE(WaitFor([&] { return PidsIn(pids).size() == 4; }, 20s)) << PidsIn(pids).size();
  const nlohmann::json job = d_.Show(id);
  std::vector<pid_t> mains = {job["ranks"][0]["pid"], job["ranks"][1]["pid"]};
  std::sort(mains.begin(), mains.end());

  CmdResult k = d_.Ctl({"kill", "--signal", "USR1", id});
  ASSERT_EQ(k.exit_code, 0) << k.err;
  ASSERT_TRUE(WaitFor([&] { return PidsIn(usr1).size() >= 2; }, 10s));
  EXPECT_EQ(PidsIn(usr1), mains) << "USR1 reached a rank's worker";

  std::filesystem::remove(usr1);
  k = d_.Ctl({"kill", "--signal", "USR1", "--all-processes", id});
  ASSERT_EQ(k.exit_code, 0) << k.err;
  EXPECT_TRUE(WaitFor([&] { return PidsIn(usr1) == PidsIn(pids); }, 10s))
      << PidsIn(usr1).size() << " of 4 processes got it";
  EXPECT_EQ(d_.Show(id)["state"], "RUNNING");

  CmdResult bad = d_.Ctl({"kill", "--all-processes", id});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("--all-processes goes with --signal"), std::string::npos) << bad.err;
  EXPECT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  const nlohmann::json ended = d_.WaitEnded(id);
  EXPECT_EQ(ended["root_cause"]["cancelled_by"], "root");
  EXPECT_EQ(ended["root_cause"]["message"], "cancelled by root");
  CmdResult shown = d_.Ctl({"show", id});
  EXPECT_NE(shown.out.find("cancelled by root"), std::string::npos) << shown.out;
}

// A client that does not read (its stdout a pipe nobody reads) fills its
// queue in ltd; once every attach of the job is stalled so, the supervisor
// stops sending the job's lines to ltd (they are in the log). The client
// reading again goes on from the log where it was: no line is missing.
TEST_F(Console, AStalledAttachStopsTheJobsLinesUntilItReadsAgain) {
  const std::string go = d_.dir() + "/GO";
  const std::string id =
      SubmitDetached({"--devices", "1", "--", kChild, "waitfile:" + go + ",print:300000,hang"});
  ASSERT_TRUE(WaitFor([&] { return d_.Show(id)["state"] == "RUNNING"; }, 20s));
  int out[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  const std::string err_file = d_.dir() + "/attach.err";
  const pid_t pid = fork();
  if (pid == 0) {
    const int err = open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (err < 0 || dup2(out[1], 1) < 0 || dup2(err, 2) < 0) _exit(127);
    const std::string ltctl = LtctlPath(), socket = d_.socket();
    execl(ltctl.c_str(), ltctl.c_str(), "--socket", socket.c_str(), "attach", id.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  // Off once the attach is open (before it, nobody wanted the lines).
  const std::string opened = "job=" + id + " attach stream opened";
  const std::string off = "job=" + id + " output lines off";
  const auto off_after_open = [&](const std::string& log) {
    const size_t at = log.find(opened);
    return at == std::string::npos ? std::string::npos : log.find(off, at);
  };
  // The job prints once the attach is open (it starts at the log's end).
  EXPECT_TRUE(WaitFor([&] { return d_.log().find(opened) != std::string::npos; }, 30s));
  std::ofstream(go).close();
  const bool stalled = WaitFor([&] { return off_after_open(d_.log()) != std::string::npos; }, 30s);
  // Read again: the queue drains, the lines come back, with the notice.
  // Each line is the one after the last: "[0] line I of N". The rank is
  // killed while it prints, so its last line may be cut short (as it wrote
  // it): a line without its " of N" is not one of the numbered lines.
  long lines = 0, gaps = 0;
  std::string first_gap;
  std::thread reader([fd = out[0], &lines, &gaps, &first_gap] {
    char buf[65536];
    std::string pending;
    long last = -1;
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) {
      pending.append(buf, static_cast<size_t>(n));
      size_t at = 0;
      for (size_t nl; (nl = pending.find('\n', at)) != std::string::npos; at = nl + 1) {
        const std::string line = pending.substr(at, nl - at);
        long i = -1, of = -1;
        if (std::sscanf(line.c_str(), "[0] line %ld of %ld", &i, &of) != 2 || of != 300000)
          continue;
        if (last >= 0 && i != last + 1 && gaps++ == 0) first_gap = line;
        last = i;
        ++lines;
      }
      pending.erase(0, at);
    }
  });
  const bool resumed = WaitFor(
      [&] {
        const std::string log = d_.log();
        const size_t at = off_after_open(log);
        return at != std::string::npos &&
               log.find("job=" + id + " output lines on", at) != std::string::npos;
      },
      30s);
  const CmdResult killed = d_.Ctl({"kill", id});
  EXPECT_EQ(killed.exit_code, 0) << killed.out << killed.err;
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  reader.join();
  close(out[0]);
  EXPECT_TRUE(stalled) << "the supervisor kept sending lines nobody could take";
  EXPECT_TRUE(resumed) << "the lines did not come back once the client read again";
  std::ifstream in(err_file);
  const std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_GT(lines, 0);
  EXPECT_EQ(gaps, 0) << "first line after a gap: " << first_gap;
  EXPECT_EQ(err.find("dropped"), std::string::npos) << "attach's stderr: " << err;
}

}  // namespace
}  // namespace ltd::test
