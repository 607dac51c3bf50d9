// ltd under systemd, without systemd: the test plays systemd's part. It
// owns the NOTIFY_SOCKET datagram socket ltd reports to, the listening
// socket it passes as fd 3 (LISTEN_FDS=1, LISTEN_PID=ltd's pid, set in the
// forked child before exec, as systemd does), and WATCHDOG_USEC. Then
// `systemd-analyze verify` on the generated units where it runs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "harness.h"

namespace ltd::test {
namespace {

using Clock = std::chrono::steady_clock;

const std::string kChild = TestChildPath();

// A Unix socket bound at `path`: datagram for notify, listening stream for
// activation. -1 and a failed expectation when it cannot be made.
int BoundSocket(const std::string& path, int type) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return -1;
  std::strcpy(addr.sun_path, path.c_str());
  const int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0) << std::strerror(errno);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  if (type == SOCK_STREAM) {
    EXPECT_EQ(listen(fd, 16), 0) << std::strerror(errno);
  }
  return fd;
}

// Systemd's side of the notify protocol: datagrams, each one message.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = BoundSocket(path, SOCK_DGRAM);
  }
  ~NotifySocket() {
    if (fd_ >= 0) close(fd_);
  }
  const std::string& path() const { return path_; }

  struct Message {
    std::string text;
    Clock::time_point at;
  };
  // The next message, or nullopt at the deadline.
  std::optional<Message> Next(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n < 0) return std::nullopt;
    Message m{std::string(buf, static_cast<size_t>(n)), Clock::now()};
    all_.push_back(m.text);
    return m;
  }
  // Reads until a message containing `needle`; every message meanwhile is
  // kept in all().
  std::optional<Message> WaitFor(const std::string& needle, std::chrono::milliseconds timeout) {
    const auto end = Clock::now() + timeout;
    while (Clock::now() < end) {
      auto m = Next(std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()));
      if (m && m->text.find(needle) != std::string::npos) return m;
    }
    return std::nullopt;
  }
  std::string all() const {
    std::string out;
    for (const auto& m : all_) out += "[" + m + "]\n";
    return out;
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::vector<std::string> all_;
};

// After the test: no process of its jobs, no zombie, no child left.
void ExpectNothingLeft(const Daemon& d) {
  EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(d.marker()).empty(); }, 10s))
      << "processes left behind: " << ProcessesWithMarker(d.marker()).size();
  for (pid_t pid : ProcessesWithMarker(d.marker())) kill(pid, SIGKILL);
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1) << "a child of the test is left";
}

std::string ReadFileForTest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string Trim(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

TEST(SystemdNotify, ReadyStatusWatchdogAndStopping) {
  Daemon d;
  NotifySocket notify(d.dir() + "/notify");
  const std::string notify_path = notify.path();
  d.set_child_setup([notify_path] {
    setenv("NOTIFY_SOCKET", notify_path.c_str(), 1);
    setenv("WATCHDOG_USEC", "400000", 1);
    setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  });
  ASSERT_TRUE(d.Start()) << d.log();

  auto ready = notify.WaitFor("READY=1", 10s);
  ASSERT_TRUE(ready) << notify.all() << d.log();
  EXPECT_NE(ready->text.find("STATUS=ready: 0 running, 0 pending"), std::string::npos)
      << ready->text;
  EXPECT_NE(ready->text.find("MAINPID=" + std::to_string(d.pid())), std::string::npos)
      << ready->text;

  // Pings every WATCHDOG_USEC/2: a few in a row, never much sooner than
  // that apart (no upper bound: a loaded machine may be late).
  std::vector<Clock::time_point> pings;
  const auto end = Clock::now() + 20s;
  while (pings.size() < 4 && Clock::now() < end) {
    if (auto m = notify.WaitFor("WATCHDOG=1", 10s)) pings.push_back(m->at);
  }
  ASSERT_EQ(pings.size(), 4u) << notify.all();
  for (size_t i = 1; i < pings.size(); ++i) {
    EXPECT_GE(pings[i] - pings[i - 1], 150ms) << "pinged more often than every 200ms";
  }
  EXPECT_NE(d.log().find("systemd watchdog: 400 ms; pinging every 200 ms"), std::string::npos);

  // STATUS= follows the jobs.
  CmdResult r = d.Ctl({"submit", "-d", "--devices", "2", "--", kChild, "hang"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string id = Trim(r.out);
  EXPECT_TRUE(notify.WaitFor("STATUS=1 running, 0 pending", 15s)) << notify.all();
  ASSERT_EQ(d.Ctl({"kill", id}).exit_code, 0);
  d.WaitEnded(id);
  EXPECT_TRUE(notify.WaitFor("STATUS=0 running, 0 pending", 15s)) << notify.all();

  EXPECT_EQ(d.Stop(), 0);
  EXPECT_TRUE(notify.WaitFor("STOPPING=1", 5s)) << notify.all();
  ExpectNothingLeft(d);
}

TEST(SystemdNotify, WedgedLoopStopsPinging) {
  Daemon d;
  NotifySocket notify(d.dir() + "/notify");
  const std::string notify_path = notify.path();
  d.set_child_setup([notify_path] {
    setenv("NOTIFY_SOCKET", notify_path.c_str(), 1);
    setenv("WATCHDOG_USEC", "200000", 1);
    setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
    setenv("LTD_TEST_WEDGE_AFTER_MS", "1000", 1);
  });
  ASSERT_TRUE(d.Start()) << d.log();
  ASSERT_TRUE(notify.WaitFor("WATCHDOG=1", 10s)) << notify.all();
  // The hook says so on the notify socket right before it blocks the loop,
  // so every ping after this one would come from a wedged loop.
  ASSERT_TRUE(notify.WaitFor("X_LTD_TEST=wedged", 20s)) << notify.all() << d.log();
  // systemd would kill ltd after 200ms without a ping; give it ten times that.
  auto late = notify.WaitFor("WATCHDOG=1", 2s);
  EXPECT_FALSE(late) << "a wedged loop still pinged: " << notify.all();
  EXPECT_TRUE(ProcessAlive(d.pid()));
  d.KillHard();
  ExpectNothingLeft(d);
}

TEST(SystemdNotify, NoWatchdogForAnotherPid) {
  // WATCHDOG_PID names another process (a child of the one systemd
  // started): not ltd's watchdog to feed.
  Daemon d;
  NotifySocket notify(d.dir() + "/notify");
  const std::string notify_path = notify.path();
  d.set_child_setup([notify_path] {
    setenv("NOTIFY_SOCKET", notify_path.c_str(), 1);
    setenv("WATCHDOG_USEC", "200000", 1);
    setenv("WATCHDOG_PID", "1", 1);
  });
  ASSERT_TRUE(d.Start()) << d.log();
  ASSERT_TRUE(notify.WaitFor("READY=1", 10s)) << notify.all();
  EXPECT_FALSE(notify.WaitFor("WATCHDOG=1", 1s)) << notify.all();
  EXPECT_EQ(d.log().find("systemd watchdog"), std::string::npos);
  EXPECT_EQ(d.Stop(), 0);
  ExpectNothingLeft(d);
}

// Passes `fd` as systemd does: fd 3, LISTEN_FDS=1, LISTEN_PID of ltd.
std::function<void()> PassListeningFd(int fd, const char* count = "1") {
  return [fd, count] {
    if (fd == 3) {
      fcntl(3, F_SETFD, 0);
    } else {
      dup2(fd, 3);
    }
    setenv("LISTEN_FDS", count, 1);
    setenv("LISTEN_PID", std::to_string(getpid()).c_str(), 1);
  };
}

TEST(SocketActivation, TakesTheSocketAndClientsWaitAcrossRestarts) {
  Daemon d;
  const int sock = BoundSocket(d.socket(), SOCK_STREAM);
  ASSERT_GE(sock, 0);
  d.set_child_setup(PassListeningFd(sock));
  ASSERT_TRUE(d.Start()) << d.log();
  CmdResult r = d.Ctl({"submit", "--devices", "2", "--", kChild, "exit:0"});
  EXPECT_EQ(r.exit_code, 0) << r.err << d.log();
  EXPECT_NE(d.log().find("(socket from systemd)"), std::string::npos) << d.log();
  EXPECT_EQ(d.Stop(), 0);
  // The socket is systemd's: ltd leaves its file.
  struct stat st {};
  EXPECT_EQ(lstat(d.socket().c_str(), &st), 0) << "ltd removed a socket it did not make";

  // While no ltd runs, a client waits in the backlog; the next ltd, given
  // the same socket, answers it.
  CmdResult waiting;
  std::thread client([&] { waiting = d.Ctl({"ps", "-a"}, 60s); });
  // Whether it connects before or after this ltd starts, it must get its
  // answer from it.
  ASSERT_TRUE(d.Start()) << d.log();
  client.join();
  EXPECT_EQ(waiting.exit_code, 0) << waiting.err;
  EXPECT_NE(waiting.out.find("SUCCEEDED"), std::string::npos) << waiting.out;
  EXPECT_EQ(d.Stop(), 0);
  close(sock);
  ExpectNothingLeft(d);
}

TEST(SocketActivation, StartedByHandItBindsItsOwn) {
  Daemon d;
  ASSERT_TRUE(d.Start()) << d.log();
  EXPECT_EQ(d.log().find("(socket from systemd)"), std::string::npos);
  EXPECT_EQ(d.Ctl({"ps"}).exit_code, 0);
  EXPECT_EQ(d.Stop(), 0);
  struct stat st {};
  EXPECT_NE(lstat(d.socket().c_str(), &st), 0) << "ltd left the socket it made";
  ExpectNothingLeft(d);
}

TEST(SocketActivation, RefusesWhatItCannotUse) {
  struct Case {
    const char* what;
    int type;  // 0: a regular file
    const char* count;
    const char* expect;
  };
  for (const Case& c : {Case{"file", 0, "1", "not a listening Unix stream socket"},
                        Case{"datagram", SOCK_DGRAM, "1", "not a listening Unix stream socket"},
                        Case{"two", SOCK_STREAM, "2", "systemd passed 2 sockets"}}) {
    SCOPED_TRACE(c.what);
    Daemon d;
    int fd = -1;
    if (c.type == 0) {
      fd = open((d.dir() + "/file").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    } else {
      fd = BoundSocket(d.dir() + "/other", c.type);
    }
    ASSERT_GE(fd, 0);
    const int extra = c.count[0] == '2' ? BoundSocket(d.dir() + "/second", SOCK_STREAM) : -1;
    d.set_child_setup([fd, extra, count = c.count] {
      PassListeningFd(fd, count)();
      if (extra >= 0) dup2(extra, 4);
    });
    EXPECT_FALSE(d.Start());
    EXPECT_NE(d.log().find(c.expect), std::string::npos) << d.log();
    close(fd);
    if (extra >= 0) close(extra);
    ExpectNothingLeft(d);
  }
}

// The units as installed, checked by systemd's own verifier. ExecStart
// names the install prefix's ltd, absent here, so the check runs on a copy
// that names the built one.
TEST(SystemdUnits, VerifyCleanly) {
  const std::string dir = LT_SYSTEMD_UNIT_DIR;
  const std::string service = ReadFileForTest(dir + "/ltd.service");
  const std::string socket_unit = ReadFileForTest(dir + "/ltd.socket");
  ASSERT_FALSE(service.empty()) << "no generated " << dir << "/ltd.service";
  ASSERT_FALSE(socket_unit.empty());
  EXPECT_NE(service.find("Type=notify"), std::string::npos);
  EXPECT_NE(service.find("WatchdogSec="), std::string::npos);
  EXPECT_NE(service.find("ExecStart=" LT_INSTALL_SBINDIR "/ltd\n"), std::string::npos) << service;
  EXPECT_EQ(service.find('@'), std::string::npos) << "an unsubstituted @VAR@";
  EXPECT_NE(socket_unit.find("ListenStream=/run/ltd/ltd.sock"), std::string::npos);

  CmdResult which = RunCommand({"/bin/sh", "-c", "command -v systemd-analyze"}, {}, 10s);
  if (which.exit_code != 0)
    GTEST_SKIP() << "systemd-analyze is not installed (apt-get install systemd)";
  Daemon d;  // a temp dir
  const std::string copy = d.dir() + "/units";
  std::filesystem::create_directories(copy);
  std::string local = service;
  const std::string from = LT_INSTALL_SBINDIR "/ltd";
  local.replace(local.find(from), from.size(), LtdPath());
  std::ofstream(copy + "/ltd.service") << local;
  std::ofstream(copy + "/ltd.socket") << socket_unit;
  // --man=no: the man pages Documentation= names are installed with the
  // package (its test checks them), not in the build tree.
  CmdResult v = RunCommand(
      {Trim(which.out), "verify", "--man=no", copy + "/ltd.socket", copy + "/ltd.service"},
      {"SYSTEMD_LOG_COLOR=0"}, 60s);
  if (v.exit_code != 0 && (v.err.find("Failed to initialize manager") != std::string::npos ||
                           v.err.find("Failed to setup") != std::string::npos)) {
    GTEST_SKIP() << "systemd-analyze verify cannot run here: " << v.err;
  }
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  // Warnings about our units are failures too; about the host's, not.
  for (const char* unit : {"ltd.service", "ltd.socket"}) {
    EXPECT_EQ(v.err.find(copy + "/" + unit + ":"), std::string::npos) << v.err;
  }
}

}  // namespace
}  // namespace ltd::test
