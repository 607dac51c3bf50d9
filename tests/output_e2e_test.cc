// A job's output reaches ltd only while a client watches it: a real ltd
// and its real lt-shim, a job printing a line every 20 ms. What ltd
// receives is counted by its metrics (ltd_output_lines_total, scraped with
// curl); when the supervisor switched is in ltd's debug log.
#include <signal.h>

#include <atomic>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "e2e_fixture.h"

namespace ltd::test {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The numbers of "line N" lines of `text` ("[0] line N" with `prefix`), in order.
std::vector<long> Numbers(const std::string& text, const std::string& prefix) {
  std::vector<long> out;
  std::istringstream in(text);
  const std::string head = prefix + "line ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(head, 0) == 0) out.push_back(std::stol(line.substr(head.size())));
  }
  return out;
}

// 0, 1, 2, ... with no gap from `first` on.
bool Consecutive(const std::vector<long>& n, long first) {
  for (size_t i = 0; i < n.size(); ++i) {
    if (n[i] != first + static_cast<long>(i)) return false;
  }
  return true;
}

class OutputE2E : public MetricsE2E {
 protected:
  // Output lines ltd received from supervisors so far.
  double Received() {
    const std::string page = Fetch();
    std::smatch m;
    static const std::regex line("\nltd_output_lines_total ([0-9.e+]+)");
    if (!std::regex_search(page, m, line)) {
      ADD_FAILURE() << "no ltd_output_lines_total in\n" << page;
      return -1;
    }
    return std::stod(m[1]);
  }
  size_t LogLines(const std::string& id) { return Count(d_.Ctl({"logs", id}).out, "\n"); }
  // Switches the supervisor answered, as ltd's debug log says.
  size_t Switched(const std::string& id, const char* to) {
    return Count(d_.log(), "job=" + id + " supervisor output " + to);
  }
  // Proves ltd receives nothing while the job prints 40 more lines. The
  // first 40 let lines sent before the switch arrive.
  void ExpectNothingReceived(const std::string& id) {
    size_t n = LogLines(id);
    ASSERT_TRUE(WaitFor([&] { return LogLines(id) >= n + 40; }, 30s));
    const double before = Received();
    n = LogLines(id);
    ASSERT_TRUE(WaitFor([&] { return LogLines(id) >= n + 40; }, 30s));
    EXPECT_EQ(Received(), before) << "ltd received output while nobody watched";
  }
  // Waits until ltd has received `lines` more lines than it had.
  void ExpectReceiving(double lines) {
    const double before = Received();
    EXPECT_TRUE(WaitFor([&] { return Received() >= before + lines; }, 30s))
        << "ltd receives no output while a client watches";
  }
};

TEST_F(OutputE2E, SupervisorSendsOutputOnlyWhileAClientWatches) {
  const std::string stop = d_.dir() + "/STOP";
  const std::string id = SubmitDetached(
      {"--devices", "1", "--", "/bin/sh", "-c",
       "i=0; while [ ! -e " + stop + " ]; do echo \"line $i\"; i=$((i+1)); sleep 0.02; done"});
  // Nobody watches: ltd turned the supervisor's output off.
  ASSERT_TRUE(WaitFor([&] { return Switched(id, "off") == 1; }, 20s)) << d_.log();
  ExpectNothingReceived(id);

  // An attach turns it on, shows new lines, and its end turns it off.
  std::atomic<pid_t> attach_pid{0};
  std::thread attach([&] {
    RunCommand({LtctlPath(), "--socket", d_.socket(), "attach", id}, {}, 60s,
               [&](pid_t pid) { attach_pid = pid; });
  });
  EXPECT_TRUE(WaitFor([&] { return Switched(id, "on") == 1; }, 20s)) << d_.log();
  ExpectReceiving(20);
  EXPECT_TRUE(WaitFor([&] { return attach_pid != 0; }, 10s));
  kill(attach_pid, SIGKILL);  // the client goes away
  attach.join();
  EXPECT_TRUE(WaitFor([&] { return Switched(id, "off") == 2; }, 20s)) << d_.log();
  ExpectNothingReceived(id);

  // A `logs -f` and an attach together: on until the job ends.
  CmdResult f, a2;
  std::thread follow([&] { f = d_.Ctl({"logs", "-f", id}, 60s); });
  EXPECT_TRUE(WaitFor([&] { return Switched(id, "on") == 2; }, 20s)) << d_.log();
  std::thread attach2([&] { a2 = d_.Ctl({"attach", id}, 60s); });
  ExpectReceiving(20);
  const size_t printed = LogLines(id);
  // Let the attach see some lines before the job ends.
  EXPECT_TRUE(WaitFor([&] { return LogLines(id) >= printed + 20; }, 30s));
  std::ofstream(stop).put('x');
  follow.join();
  attach2.join();
  EXPECT_EQ(d_.WaitEnded(id)["state"], "SUCCEEDED");

  // `logs -f` has every line, in order, as the log does.
  const std::string log = d_.Ctl({"logs", id}).out;
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(f.out, log);
  const std::vector<long> all = Numbers(log, "[0] ");
  EXPECT_TRUE(Consecutive(all, 0)) << log;
  EXPECT_GE(all.size(), printed + 20);
  // The attach shows the lines from its start to the end, none missing.
  EXPECT_EQ(a2.exit_code, 0) << a2.err;
  const std::vector<long> attached = Numbers(a2.out, "[0] ");
  ASSERT_FALSE(attached.empty()) << a2.out;
  EXPECT_TRUE(Consecutive(attached, attached.front())) << a2.out;
  EXPECT_EQ(attached.back(), all.back());
}

}  // namespace
}  // namespace ltd::test
