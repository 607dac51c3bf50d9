// Metrics end to end: a real ltd with --metrics-listen, scraped over HTTP
// by a real client (curl), the text parsed; counters move as jobs fail,
// restart and hang.
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <regex>
#include <sstream>

#include "e2e_fixture.h"

namespace ltd::test {
namespace {

const std::string kChild = TestChildPath();

// Sample values by series ("name{labels}" as served), from the text format.
std::map<std::string, double> Parse(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    out[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
  }
  return out;
}

class Metrics : public MetricsE2E {
 protected:
  std::vector<std::string> DaemonArgs() override {
    auto args = MetricsE2E::DaemonArgs();
    args.insert(args.end(), {"--restart-backoff", "100ms"});
    return args;
  }
  std::map<std::string, double> Scrape() {
    last_ = Fetch();
    return Parse(last_);
  }
  // Scrapes until `series` has `value` (gauges follow within a second).
  bool WaitForSample(const std::string& series, double value) {
    return WaitFor(
        [&] {
          auto s = Scrape();
          return s.count(series) != 0 && s[series] == value;
        },
        15s);
  }
  std::string last_;
};

std::string Me() {
  passwd* pw = getpwuid(getuid());
  return pw != nullptr ? pw->pw_name : std::to_string(getuid());
}

TEST_F(Metrics, CountersMoveAsJobsFailRestartAndHang) {
  auto before = Scrape();
  EXPECT_EQ(before["ltd_job_restarts_total"], 0) << last_;
  EXPECT_EQ(before["ltd_hangs_total"], 0);
  EXPECT_EQ(before["ltd_slots{state=\"free\"}"], 8);
  EXPECT_EQ(before["ltd_failure_to_teardown_seconds_count"], 0);

  // A running job: gauges per state, per user, slots.
  const std::string running = SubmitDetached({"--devices", "3", "--", kChild, "hang"});
  EXPECT_TRUE(WaitForSample("ltd_user_running_ranks{user=\"" + Me() + "\"}", 3)) << last_;
  EXPECT_TRUE(WaitForSample("ltd_jobs{state=\"RUNNING\"}", 1)) << last_;
  EXPECT_TRUE(WaitForSample("ltd_slots{state=\"busy\"}", 3)) << last_;
  EXPECT_GE(Scrape()["ltd_submit_to_running_seconds_count"], 1);
  EXPECT_EQ(d_.Ctl({"kill", running}).exit_code, 0);
  d_.WaitEnded(running);

  // Fails, restarts once, fails again.
  const std::string failing = SubmitDetached(
      {"--devices", "2", "--max-restarts", "1", "--", kChild, "--rank", "1", "exit:3", "hang"});
  EXPECT_EQ(d_.WaitEnded(failing)["state"], "FAILED");
  // A hang: one beat, then none within the timeout.
  const std::string hung = SubmitDetached(
      {"--devices", "1", "--heartbeat-timeout", "300ms", "--", kChild, "beat:1:10,hang"});
  EXPECT_EQ(d_.WaitEnded(hung)["root_cause"]["reason"], "hang");

  auto after = Scrape();
  EXPECT_EQ(after["ltd_job_restarts_total"], 1) << last_;
  EXPECT_EQ(after["ltd_hangs_total"], 1) << last_;
  EXPECT_EQ(after["ltd_jobs_ended_total{reason=\"exited\",state=\"FAILED\"}"], 1) << last_;
  EXPECT_EQ(after["ltd_jobs_ended_total{reason=\"hang\",state=\"FAILED\"}"], 1) << last_;
  EXPECT_EQ(
      after
          ["ltd_jobs_ended_total{cancelled_by=\"owner\",reason=\"cancelled\",state=\"CANCELLED\"}"],
      1)
      << last_;
  EXPECT_EQ(after["ltd_deadline_to_verdict_seconds_count"], 1) << last_;
  // Teardowns: the cancel, the failure's two attempts, the hang.
  EXPECT_EQ(after["ltd_failure_to_teardown_seconds_count"], 4) << last_;
  EXPECT_EQ(after["ltd_submit_to_running_seconds_count"], 3) << last_;
  EXPECT_TRUE(WaitForSample("ltd_jobs{state=\"FAILED\"}", 2)) << last_;
  EXPECT_TRUE(WaitForSample("ltd_slots{state=\"free\"}", 8)) << last_;
  EXPECT_EQ(Scrape().count("ltd_user_running_ranks{user=\"" + Me() + "\"}"), 0u) << last_;
  EXPECT_EQ(last_.find("id=\""), std::string::npos) << "a job id as a label";
}

// A connection to the endpoint that sent `text` and holds on.
int HalfOpen(const std::string& url, const std::string& text) {
  const std::regex hostport("http://127\\.0\\.0\\.1:([0-9]+)/");
  std::smatch m;
  if (!std::regex_search(url, m, hostport)) return -1;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(m[1])));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      send(fd, text.data(), text.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(text.size())) {
    close(fd);
    return -1;
  }
  return fd;
}

// Whether the server closed `fd` (EOF, or a reset: a close with the
// request's bytes unread sends one), waiting at most `timeout`.
bool ClosedWithin(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout.count())) != 1) return false;
  char c;
  const ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

// The issue's: three requests without their blank line are held open; a
// scrape is answered beside them (curl's own 10 s deadline, no timing
// assert), and each held one is closed once its 5 s to arrive whole are
// past. Fails where one civetweb thread served the endpoint.
TEST_F(Metrics, HalfOpenRequestsNeitherSilenceNorOutliveTheirDeadline) {
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(HalfOpen(url_, "GET /metrics HTTP/1.1\r\nHost: x\r\n"));
    ASSERT_GE(held.back(), 0);
  }
  CmdResult r = RunCommand({curl_, "-sS", "--fail", "--max-time", "10", url_}, {}, 20s);
  EXPECT_EQ(r.exit_code, 0) << "no scrape beside 3 half-open requests: " << r.err;
  EXPECT_NE(r.out.find("ltd_slots{state=\"free\"}"), std::string::npos) << r.out;
  for (int fd : held) {
    EXPECT_TRUE(ClosedWithin(fd, 30s)) << "a half-open request was kept past its deadline";
    close(fd);
  }
}

// One client address holds at most 8 connections: its 20 held ones lose
// the oldest 12 at once, and a scrape from it is still answered.
TEST_F(Metrics, OneAddressHoldsABoundedNumberOfConnections) {
  std::vector<int> held;
  for (int i = 0; i < 20; ++i) {
    held.push_back(HalfOpen(url_, "GET /met"));
    ASSERT_GE(held.back(), 0);
  }
  int closed = 0;
  for (int i = 0; i < 12; ++i) closed += ClosedWithin(held[static_cast<size_t>(i)], 3s) ? 1 : 0;
  EXPECT_EQ(closed, 12) << "the oldest connections of the address were kept";
  EXPECT_NE(Fetch().find("ltd_slots"), std::string::npos);
  for (int fd : held) close(fd);
}

TEST(MetricsOptions, OffByDefaultAndABadAddressIsOneLine) {
  {
    Daemon d;
    ASSERT_TRUE(d.Start()) << d.log();
    EXPECT_EQ(d.log().find("metrics on"), std::string::npos);
    d.Stop();
  }
  // A port already taken.
  const int taken = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(taken, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(taken, 1), 0);
  socklen_t len = sizeof addr;
  getsockname(taken, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  Daemon d;
  // Its socket may answer before it gets to the metrics: whether Start()
  // saw it up or not, it must say why and exit 1.
  (void)d.Start({"--metrics-listen", "127.0.0.1:" + port});
  EXPECT_TRUE(WaitFor(
      [&] { return d.log().find("choose another --metrics-listen") != std::string::npos; }, 10s))
      << d.log();
  EXPECT_NE(d.log().find("ltd: cannot serve metrics on 127.0.0.1:" + port), std::string::npos)
      << d.log();
  if (d.pid() > 0) {
    EXPECT_EQ(d.Stop(), 1) << d.log();
  }
  close(taken);
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
}

}  // namespace
}  // namespace ltd::test
