// The security suite's fixture (tests/security_*_e2e_test.cc): two throwaway
// users and a group, a public dir of binaries they run, a real ltd, and a
// teardown that proves nothing is left. The threat model is in
// security_e2e_test.cc.
#pragma once

// process of the test or of the users, no zombie, no user, no mount).
#include <fcntl.h>
#include <grp.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pwd.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "harness.h"
#include "ltd.grpc.pb.h"

namespace ltd::test {

namespace fs = std::filesystem;

inline size_t Lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

inline nlohmann::json Json(const std::string& text) {
  // nlohmann's parser rejects invalid UTF-8: valid JSON here means escaped.
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

inline void WriteFile(const std::string& path, const std::string& data, mode_t mode) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
  chmod(path.c_str(), mode);
}

// A one-line error: exit 1, a message that is not empty, says `needle`,
// and is one line.
inline void ExpectOneLineError(const CmdResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(Has(r.err, needle)) << "wanted '" << needle << "' in: " << r.err;
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  EXPECT_GT(TrimEnd(r.err).size(), std::string("ltctl: ").size()) << "an empty message";
}

// A command that failed said why: never "ltctl: " and nothing more.
inline void ExpectNoSilentFailure(const CmdResult& r) {
  if (r.exit_code == 0) return;
  std::string last = TrimEnd(r.err);
  last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
  EXPECT_GT(last.size(), std::string("ltctl:").size()) << "failed with an empty message: " << r.err;
}

// ltd's CPU time so far (user + system), in seconds.
inline double CpuSeconds(pid_t pid) {
  const std::string stat = ReadWhole("/proc/" + std::to_string(pid) + "/stat");
  const auto close_paren = stat.rfind(')');
  if (close_paren == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close_paren + 2));
  std::string field;
  long long utime = 0, stime = 0;
  // Fields 3.. after the name: state is field 3; utime 14, stime 15.
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::atoll(field.c_str());
    if (i == 15) stime = std::atoll(field.c_str());
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// ---- connections held open by another process ----

// A child process (as `as`, or root) that opens `n` connections to ltd's
// socket, holds them, and reports on a pipe how many are still open and
// how many ltd has closed. Killed (and every connection with it) on
// destruction or Release().
class ConnectionHolder {
 public:
  ConnectionHolder(const std::string& socket, int n, const RunAs* as) {
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) return;
    std::vector<gid_t> groups = as != nullptr ? as->groups : std::vector<gid_t>{};
    pid_ = fork();
    if (pid_ == 0) {
      close(report[0]);
      if (as != nullptr) {
        if (setgroups(groups.size(), groups.data()) != 0 || setgid(as->gid) != 0 ||
            setuid(as->uid) != 0)
          _exit(3);
      }
      Hold(socket, n, report[1]);
      _exit(0);
    }
    close(report[1]);
    fd_ = report[0];
    fcntl(fd_, F_SETFL, O_NONBLOCK);
  }
  ~ConnectionHolder() { Release(); }

  // Reads what the child reported so far.
  void Poll() {
    char buf[4096];
    for (;;) {
      const ssize_t n = read(fd_, buf, sizeof buf);
      if (n <= 0) break;
      pending_.append(buf, static_cast<size_t>(n));
    }
    for (size_t nl; (nl = pending_.find('\n')) != std::string::npos;) {
      std::istringstream line(pending_.substr(0, nl));
      pending_.erase(0, nl + 1);
      line >> connected_ >> closed_;
    }
  }
  int connected() {
    Poll();
    return connected_;
  }
  int closed() {
    Poll();
    return closed_;
  }
  void Release() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  // In the child: connect, then watch for ltd closing them.
  [[noreturn]] static void Hold(const std::string& socket, int n, int out) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
    std::vector<pollfd> fds;
    for (int i = 0; i < n; ++i) {
      const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
      if (fd < 0) break;
      if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        close(fd);
        break;  // the backlog is full: as many as ltd's queue takes
      }
      fds.push_back({fd, POLLIN | POLLRDHUP, 0});
    }
    const int connected = static_cast<int>(fds.size());
    int closed = 0, reported = -1;
    char buf[65536];
    for (;;) {
      if (closed != reported) {
        char line[64];
        const int len = std::snprintf(line, sizeof line, "%d %d\n", connected, closed);
        if (write(out, line, static_cast<size_t>(len)) < 0) _exit(0);
        reported = closed;
      }
      poll(fds.data(), fds.size(), 50);
      for (pollfd& p : fds) {
        if (p.fd < 0 || p.revents == 0) continue;
        // Drain what ltd sent (gRPC's SETTINGS); EOF or an error: closed.
        for (;;) {
          const ssize_t got = recv(p.fd, buf, sizeof buf, MSG_DONTWAIT);
          if (got > 0) continue;
          if (got < 0 && (errno == EAGAIN || errno == EINTR)) break;
          close(p.fd);
          p.fd = -1;
          ++closed;
          break;
        }
      }
    }
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  std::string pending_;
  int connected_ = 0;
  int closed_ = 0;
};

// ---- the fixture ----

class Security : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "the security suite needs root: it creates local users and runs ltd as "
                      "root; run it as root (e.g. `sudo ctest -L security`)";
    }
    if (access("/usr/sbin/useradd", X_OK) != 0 || access("/usr/sbin/groupadd", X_OK) != 0) {
      GTEST_SKIP() << "useradd/groupadd (package passwd) are not installed";
    }
    const std::string base = "lts" + std::to_string(getpid());
    group_ = base + "g";
    if (getgrnam(group_.c_str()) != nullptr) RunCommand({"/usr/sbin/groupdel", group_}, {}, 30s);
    CmdResult g = RunCommand({"/usr/sbin/groupadd", group_}, {}, 60s);
    ASSERT_EQ(g.exit_code, 0) << "groupadd " << group_ << ": " << g.err;
    have_group_ = true;
    a_ = std::make_unique<TestUser>(base + "a", std::vector<std::string>{group_});
    ASSERT_TRUE(a_->ok()) << a_->error();
    b_ = std::make_unique<TestUser>(base + "b");
    ASSERT_TRUE(b_->ok()) << b_->error();
    ASSERT_FALSE(bin_.path().empty());
    ltctl_ = bin_.Copy(LtctlPath());
    child_ = bin_.Copy(TestChildPath());
    d_.LetUsersConnect();
    set_up_ = true;
  }

  void TearDown() override {
    if (d_.pid() > 0) {
      const pid_t pid = d_.pid();
      // Told to stop, ltd exits 0: it never crashed on the way.
      EXPECT_EQ(d_.Stop(), 0) << "ltd (pid " << pid << ") did not exit 0 when stopped";
    }
    for (const std::string& m : mounts_) {
      EXPECT_EQ(umount2(m.c_str(), 0), 0) << "umount " << m << ": " << std::strerror(errno);
    }
    // Nothing of any job of this test survives, and nobody is a zombie.
    EXPECT_TRUE(WaitFor([&] { return ProcessesWithMarker(d_.marker()).empty(); }, 5s))
        << "processes left behind: " << ProcessesWithMarker(d_.marker()).size();
    for (pid_t pid : ProcessesWithMarker(d_.marker())) kill(pid, SIGKILL);
    for (const auto* u : {a_.get(), b_.get()}) {
      if (u == nullptr || !u->ok()) continue;
      EXPECT_TRUE(WaitFor([&] { return ProcessesOfUser(u->uid()).empty(); }, 5s))
          << "processes of " << u->name() << " left behind: " << ProcessesOfUser(u->uid()).size();
    }
    EXPECT_TRUE(ZombieChildrenOf(getpid()).empty());
    EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1) << "a child of the test is left";
    for (auto* u : {a_.get(), b_.get()}) {
      if (u == nullptr) continue;
      EXPECT_TRUE(u->Remove()) << u->error();
      EXPECT_EQ(getpwnam(u->name().c_str()), nullptr) << u->name() << " left";
    }
    if (have_group_) {
      RunCommand({"/usr/sbin/groupdel", group_}, {}, 60s);
      EXPECT_EQ(getgrnam(group_.c_str()), nullptr) << "group " << group_ << " left";
    }
    if (HasFailure() && set_up_) {
      std::fprintf(stderr, "---- ltd log (last 20000 bytes) ----\n%s\n",
                   Tail(d_.log(), 20000).c_str());
    }
  }

  static std::string Tail(const std::string& s, size_t n) {
    return s.size() <= n ? s : s.substr(s.size() - n);
  }

  bool StartLtd(std::vector<std::string> args = {}) { return d_.Start(std::move(args)); }

  // ltctl as `u`, in `cwd` (default: u's home), with the test's marker.
  CmdResult CtlAs(const TestUser& u, std::vector<std::string> args,
                  std::chrono::milliseconds timeout = 30s, std::vector<std::string> env = {},
                  const std::string& cwd = "") const {
    std::vector<std::string> argv = {ltctl_, "--socket", d_.socket()};
    argv.insert(argv.end(), args.begin(), args.end());
    env.insert(env.end(),
               {d_.marker(), "HOME=" + u.home(), "USER=" + u.name(), "LOGNAME=" + u.name()});
    return RunCommandAs(u.As(cwd), argv, env, timeout);
  }

  // Submits detached as `u` and returns the job id ("" on failure).
  std::string SubmitAs(const TestUser& u, std::vector<std::string> args,
                       std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {"submit", "-d"};
    argv.insert(argv.end(), args.begin(), args.end());
    CmdResult r = CtlAs(u, argv, 30s, std::move(env));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? TrimEnd(r.out) : "";
  }

  // Every job ltd lists (`ps -a --json` as root).
  nlohmann::json AllJobs() const {
    CmdResult r = d_.Ctl({"--json", "ps", "-a"}, 60s);
    nlohmann::json j = Json(r.out);
    return r.exit_code == 0 && j.is_array() ? j : nlohmann::json::array();
  }

  bool WaitState(const std::string& id, const std::string& state,
                 std::chrono::milliseconds timeout = 20s) const {
    return WaitFor([&] { return d_.Show(id).value("state", "") == state; }, timeout);
  }

  // ltd is alive and `ps`, `ps -a`, `ps -a --json`, `show`, `show --json`
  // and (as its owner) `logs` of job `id` all work: exit 0, valid JSON.
  void ExpectLtdServes(const std::string& id, const TestUser& owner) {
    ASSERT_TRUE(ProcessAlive(d_.pid())) << "ltd died";
    for (const auto& args :
         std::vector<std::vector<std::string>>{{"ps"}, {"ps", "-a"}, {"show", id}, {"logs", id}}) {
      CmdResult r = CtlAs(owner, args);
      EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    }
    CmdResult ps = CtlAs(owner, {"--json", "ps", "-a"});
    EXPECT_EQ(ps.exit_code, 0) << ps.err;
    EXPECT_TRUE(Json(ps.out).is_array()) << "ps -a --json is not valid JSON";
    CmdResult show = CtlAs(owner, {"--json", "show", id});
    EXPECT_EQ(show.exit_code, 0) << show.err;
    EXPECT_TRUE(Json(show.out).is_object()) << "show --json is not valid JSON";
    EXPECT_TRUE(ProcessAlive(d_.pid())) << "ltd died";
  }

  // A directory of root's, 0700, in the public dir: what /root is to users.
  std::string PrivateDir() {
    const std::string dir = bin_.path() + "/private";
    mkdir(dir.c_str(), 0700);
    chmod(dir.c_str(), 0700);
    return dir;
  }

  PublicDir bin_;
  Daemon d_;
  std::unique_ptr<TestUser> a_, b_;
  std::string group_;
  bool have_group_ = false;
  bool set_up_ = false;
  std::string ltctl_, child_;
  std::vector<std::string> mounts_;  // unmounted in TearDown, after ltd stops
};

// ---- 1. loader variables ----

// A library whose constructor appends "UID EUID" to `out`: whoever loads
// it says so. Also an LD_AUDIT module (la_version) and a gconv module.
inline std::string BuildEvilLibrary(const std::string& dir, const std::string& out,
                                    std::string* error) {
  const std::string src = dir + "/evil.c";
  WriteFile(src,
            "#include <fcntl.h>\n#include <stdio.h>\n#include <unistd.h>\n"
            "unsigned int la_version(unsigned int v) { return v; }\n"
            "int gconv_init(void* s) { (void)s; return 1; }\n"
            "int gconv(void) { return 1; }\n"
            "__attribute__((constructor)) static void evil(void) {\n"
            "  char line[64];\n"
            "  int n = snprintf(line, sizeof line, \"%d %d\\n\", (int)getuid(), (int)geteuid());\n"
            "  int fd = open(\"" +
                out +
                "\", O_WRONLY | O_APPEND | O_CREAT, 0666);\n"
                "  if (fd >= 0) { (void)!write(fd, line, n); close(fd); }\n"
                "}\n",
            0644);
  const std::string lib = dir + "/evil.so";
  CmdResult cc = RunCommand({"/usr/bin/cc", "-shared", "-fPIC", "-o", lib, src}, {}, 120s);
  if (cc.exit_code != 0) {
    *error = cc.err;
    return "";
  }
  chmod(lib.c_str(), 0755);
  return lib;
}

}  // namespace ltd::test
