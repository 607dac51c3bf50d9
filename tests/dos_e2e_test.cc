// One local user cannot take ltd from the others (issue 20): streams,
// connects, heartbeat lines and supervisor lifetimes are bounded, each
// attack run by a throwaway user against a real ltd through the real
// ltctl, with another user's `ltctl ps` checked meanwhile. Needs root:
// skipped otherwise. Counts are small: each test shows the bound, not a
// load (bench/attack_bench.py measures the load).
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "harness.h"
#include "two_users_fixture.h"

namespace ltd::test {
namespace {

namespace fs = std::filesystem;

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

// fds of `pid` whose target contains `part` (a socket: "socket:").
int FdsTo(pid_t pid, const std::string& part) {
  int n = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code rec;
    if (Has(fs::read_symlink(it->path(), rec).string(), part)) ++n;
  }
  return n;
}

// The line of /proc/PID/status that starts with `key`; "" when none.
std::string StatusLine(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(key)) return line;
  }
  return "";
}

// The children of `parent` whose name (comm) is `name`.
std::vector<pid_t> ChildrenNamed(pid_t parent, const std::string& name) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string pid = it->path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (StatusLine(std::stoi(pid), "Name:") == "Name:\t" + name &&
        StatusLine(std::stoi(pid), "PPid:") == "PPid:\t" + std::to_string(parent)) {
      out.push_back(std::stoi(pid));
    }
  }
  return out;
}

// Each thread of `pid`: its tid, name and niceness.
struct ThreadNice {
  std::string tid, name;
  int nice = 0;
};
std::vector<ThreadNice> Threads(pid_t pid) {
  std::vector<ThreadNice> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::ifstream in(it->path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    // After "pid (comm) ": state is field 3 of stat(5), nice field 19.
    for (int i = 3; i <= 19 && fields >> field; ++i) {
      if (i == 19)
        out.push_back({it->path().filename().string(), stat.substr(open + 1, close - open - 1),
                       std::stoi(field)});
    }
  }
  return out;
}

// How many threads of `pid` run at niceness `nice`.
int ThreadsAtNice(pid_t pid, int nice) {
  const std::vector<ThreadNice> all = Threads(pid);
  return static_cast<int>(
      std::count_if(all.begin(), all.end(), [&](const ThreadNice& t) { return t.nice == nice; }));
}

// "tid name nice, ..." of every thread: what a failed check saw.
std::string NiceList(pid_t pid) {
  std::string out;
  for (const ThreadNice& t : Threads(pid))
    out += t.tid + " " + t.name + " " + std::to_string(t.nice) + ", ";
  return out;
}

// A process of `as` that connects to `socket` and closes, as fast as it
// can, until destroyed.
class ConnectFlood {
 public:
  ConnectFlood(const std::string& socket, const RunAs& as) {
    pid_ = fork();
    if (pid_ != 0) return;
    if (setgroups(0, nullptr) != 0 || setgid(as.gid) != 0 || setuid(as.uid) != 0) _exit(3);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
    for (;;) {
      const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
      if (fd < 0) _exit(4);
      (void)connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
      close(fd);
    }
  }
  ~ConnectFlood() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

 private:
  pid_t pid_ = -1;
};

class Dos : public TwoUsersTest {
 protected:
  Dos() : TwoUsersTest("ltq") {}

  // B's `ps` works `n` times of `n`.
  void ExpectOthersServed(int n) {
    int ok = 0;
    std::string last_error;
    for (int i = 0; i < n; ++i) {
      CmdResult ps = CtlAs(*b_, {"ps"}, 20s);
      if (ps.exit_code == 0) {
        ++ok;
      } else {
        last_error = ps.err;
      }
    }
    EXPECT_EQ(ok, n) << "another user's ps failed " << n - ok << " of " << n
                     << " times; last: " << last_error;
  }
};

// Streams: a user's streams past --user-max-streams are refused with one
// line naming the limit; another user's are not; once the streams end,
// the user may open more.
TEST_F(Dos, StreamsPerUserAreBounded) {
  ASSERT_TRUE(d_.Start({"--user-max-streams", "3"})) << d_.log();
  const std::string id = SubmitAs(*a_, {"--devices", "1", "--", child_, "hang"});
  ASSERT_TRUE(WaitState(id, "RUNNING"));
  // Three `wait` streams of A's, each open once ltd's log says so.
  std::vector<std::thread> waits;
  std::vector<CmdResult> results(3);
  for (int i = 0; i < 3; ++i) {
    waits.emplace_back([&, i] { results[static_cast<size_t>(i)] = CtlAs(*a_, {"wait", id}, 60s); });
  }
  const std::string opened = "wait stream opened by uid " + std::to_string(a_->uid());
  ASSERT_TRUE(WaitFor([&] { return Count(d_.log(), opened) == 3; }, 30s));
  CmdResult refused = CtlAs(*a_, {"logs", "-f", id}, 5s);
  EXPECT_EQ(refused.exit_code, 1) << "a 4th stream of A's was not refused: " << refused.err;
  EXPECT_TRUE(Has(refused.err, "--user-max-streams 3")) << refused.err;
  EXPECT_EQ(Count(TrimEnd(refused.err), "\n"), 0u) << refused.err;
  // B is another user: its streams are its own.
  CmdResult b_ps = CtlAs(*b_, {"--json", "ps", "-a"}, 20s);
  EXPECT_EQ(b_ps.exit_code, 0) << b_ps.err;
  ASSERT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  for (auto& t : waits) t.join();
  for (const CmdResult& r : results) EXPECT_FALSE(Has(r.err, "--user-max-streams")) << r.err;
  // Given back: A streams again.
  CmdResult logs = CtlAs(*a_, {"logs", id}, 20s);
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
}

// A follower of a quiet job holds no fd of its log: 20,000 of them once
// took every fd ltd had.
TEST_F(Dos, IdleFollowersHoldNoLogFd) {
  ASSERT_TRUE(d_.Start()) << d_.log();
  const std::string id = SubmitAs(*a_, {"--devices", "1", "--", child_, "print:3,hang"});
  ASSERT_TRUE(WaitState(id, "RUNNING"));
  const std::string log_dir = d_.state_dir() + "/jobs/" + id + "/";
  constexpr int kFollowers = 8;
  std::vector<std::thread> follows;
  for (int i = 0; i < kFollowers; ++i) {
    follows.emplace_back([&] { CtlAs(*a_, {"logs", "-f", id}, 60s); });
  }
  // ltd's word that each follows (a count of its sockets is not: a client
  // connection of before may still be closing when it is taken).
  const std::string opened = "logs stream opened by uid " + std::to_string(a_->uid());
  size_t following = 0;
  int log_fds = -1;
  EXPECT_TRUE(WaitFor(
      [&] {
        following = Count(d_.log(), opened);
        log_fds = FdsTo(d_.pid(), log_dir);
        return following == static_cast<size_t>(kFollowers) && log_fds == 0;
      },
      30s))
      << following << " of " << kFollowers << " followers following: ltd holds " << log_fds
      << " fds of the job's dir";
  ASSERT_EQ(d_.Ctl({"kill", id}).exit_code, 0);
  for (auto& t : follows) t.join();
}

// Connects: one user's connect flood leaves another's `ps` working.
TEST_F(Dos, AConnectFloodLeavesOthersServed) {
  ASSERT_TRUE(d_.Start()) << d_.log();
  ASSERT_EQ(CtlAs(*b_, {"ps"}).exit_code, 0);
  // Flooders enough to keep ltd's listen queue full on 2 cores.
  std::vector<std::unique_ptr<ConnectFlood>> floods;
  ASSERT_EQ(ThreadsAtNice(d_.pid(), 10), 0);
  ASSERT_EQ(ThreadsAtNice(d_.pid(), -5), 1) << "ltd's accept thread runs ahead of users";
  for (int i = 0; i < 4; ++i)
    floods.push_back(std::make_unique<ConnectFlood>(d_.socket(), a_->As()));
  // Refusing the flood, the accept thread drops behind the users' processes.
  EXPECT_TRUE(WaitFor([&] { return ThreadsAtNice(d_.pid(), 10) == 1; }, 20s))
      << "ltd's accept thread kept its priority while refusing a flood: " << NiceList(d_.pid());
  ExpectOthersServed(20);
  floods.clear();
  // The flood over, it goes back ahead at the next connect.
  EXPECT_TRUE(WaitFor(
      [&] {
        (void)CtlAs(*b_, {"ps"}, 20s);
        return ThreadsAtNice(d_.pid(), -5) == 1;
      },
      20s))
      << "ltd's accept thread stayed behind after the flood: " << NiceList(d_.pid());
  // The threads gRPC started as it took connections, some from the accept
  // thread while it was ahead or behind, run as ltd's others do.
  const std::vector<ThreadNice> now = Threads(d_.pid());
  EXPECT_EQ(std::count_if(now.begin(), now.end(), [](const ThreadNice& t) { return t.nice != 0; }),
            1)
      << NiceList(d_.pid());
}

// Heartbeat lines: a rank writing `auto on` in a loop costs one log line
// and one record, and the job still ends as it should.
TEST_F(Dos, ARepeatedHeartbeatLineIsNewsOnce) {
  ASSERT_TRUE(d_.Start()) << d_.log();
  const std::string id =
      SubmitAs(*a_, {"--devices", "1", "--", child_, "repeat:200000:auto on,exit:0"});
  nlohmann::json ended = d_.WaitEnded(id, 120s);
  EXPECT_EQ(ended.value("state", ""), "SUCCEEDED") << ended.dump();
  EXPECT_LE(Count(d_.log(), "automatic heartbeats on"), 1u);
  ExpectOthersServed(3);
}

// Supervisor lifetimes: a job killed while its supervisor waits for an
// etcd that never answers leaves no root supervisor behind.
TEST_F(Dos, AJobKilledWhileWaitingForEtcdLeavesNoSupervisor) {
  ASSERT_TRUE(d_.Start()) << d_.log();
  const std::string id =
      SubmitAs(*a_, {"--devices", "1", "--nnodes", "2", "--rdzv", "etcd://127.0.0.1:1",
                     "--rdzv-timeout", "8760h", "--grace", "2s", "--", child_, "hang"});
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(WaitFor([&] { return !Supervisors(d_.state_dir(), id).empty(); }, 20s));
  CmdResult kill = CtlAs(*a_, {"kill", id}, 20s);
  EXPECT_EQ(kill.exit_code, 0) << kill.err;
  EXPECT_TRUE(WaitFor([&] { return Supervisors(d_.state_dir(), id).empty(); }, 10s))
      << "the supervisor of job " << id << " outlived its kill";
  const std::string state = d_.WaitEnded(id, 20s).value("state", "");
  EXPECT_TRUE(state == "CANCELLED" || state == "FAILED") << state;
}

// Limits of the submitter: a rank runs with the limits of the process
// that submitted it (an admin's limits.conf of 512 fds and 64 processes),
// not ltd's raised fd limit.
TEST_F(Dos, RanksGetTheSubmittersResourceLimits) {
  ASSERT_TRUE(d_.Start()) << d_.log();
  if (access("/usr/bin/prlimit", X_OK) != 0) GTEST_SKIP() << "prlimit (util-linux) is missing";
  std::vector<std::string> argv = {"/usr/bin/prlimit",
                                   "--nofile=512:512",
                                   "--nproc=64:64",
                                   ltctl_,
                                   "--socket",
                                   d_.socket(),
                                   "submit",
                                   "--devices",
                                   "1",
                                   "--",
                                   child_,
                                   "rlimits"};
  CmdResult r =
      RunCommandAs(a_->As(), argv, {d_.marker(), "HOME=" + a_->home(), "USER=" + a_->name()}, 30s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Has(r.out, "nofile=512:512 nproc=64:64")) << r.out << r.err;
}

// Python that makes `c`, a TCP socket to `s` (never read), its send queue
// full, set to linger an hour once closed: a close that waits.
const std::string kLingeringSocket = R"(
import os, socket, struct, sys, time
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(1)
c = socket.create_connection(l.getsockname())
s, _ = l.accept()
c.setblocking(False)
try:
    while True:
        c.send(b"x" * 65536)
except BlockingIOError:
    pass
c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 3600))
)";

// A rank's fds to its root supervisor carry no file descriptors: a rank
// that sends a TCP socket set to linger an hour, its send queue full, on
// its heartbeat fd, stdout and stderr, then closes its own copy, does not
// hold the supervisor in that socket's close, and the job is killed as
// any other.
TEST_F(Dos, ARankCannotHoldItsSupervisorInASocketsClose) {
  ASSERT_TRUE(d_.Start()) << d_.log();
  const std::string rank = kLingeringSocket + R"(
for fd in (3, 1, 2):
    try:
        socket.send_fds(socket.socket(fileno=os.dup(fd)), [b"\n"], [c.fileno()])
        print("sent on", fd, flush=True)
    except OSError as e:
        print("refused on", fd, e.strerror, flush=True)
print("lingering", flush=True)
c.close()  # where nothing took it, it lingers here, in the rank
time.sleep(3600)
)";
  const std::string id =
      SubmitAs(*a_, {"--devices", "1", "--grace", "1s", "--", "/usr/bin/python3", "-c", rank});
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(WaitFor(
      [&] {
        return Has(CtlAs(*a_, {"logs", id}).out, "lingering");
      },
      30s))
      << CtlAs(*a_, {"logs", id}).out;
  CmdResult kill = CtlAs(*a_, {"kill", id}, 20s);
  EXPECT_EQ(kill.exit_code, 0) << kill.err;
  EXPECT_EQ(d_.WaitEnded(id, 20s).value("state", ""), "CANCELLED");
  ExpectOthersServed(3);
}

// Nor do a client's fds to ltd: one that sends ltd such a socket over
// ltd's own socket is refused, where the kernel can refuse it (Linux
// 6.16's SO_PASSRIGHTS); before, the read that dropped it held ltd's
// accept thread or a gRPC thread in its close, and every user waited.
TEST_F(Dos, AClientCannotPassLtdADescriptor) {
  const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int off = 0;
  const bool refusable =
      setsockopt(probe, SOL_SOCKET, 83 /* SO_PASSRIGHTS */, &off, sizeof off) == 0;
  close(probe);
  if (!refusable) GTEST_SKIP() << "this kernel cannot refuse descriptors (Linux 6.16 can)";
  ASSERT_TRUE(d_.Start()) << d_.log();
  // The peer that never reads is closed first, so that no close lingers
  // in this process, nor in ltd should the send be taken.
  const std::string client = kLingeringSocket + R"(
u = socket.socket(socket.AF_UNIX)
u.connect(sys.argv[1])
try:
    socket.send_fds(u, [b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"], [c.fileno()])
    print("sent")
except OSError as e:
    print("refused:", e.strerror)
s.close()
)";
  CmdResult r = RunCommandAs(a_->As(), {"/usr/bin/python3", "-c", client, d_.socket()},
                             {"HOME=" + a_->home()}, 30s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Has(r.out, "refused: Operation not permitted")) << r.out << r.err;
  ExpectOthersServed(3);
}

// Where the kernel cannot refuse them (before Linux 6.16), ltd relays its
// clients' connections (--fd-relay, forced here): a client that sends a
// TCP socket set to linger an hour, its peer never reading, has its
// connection ended; the socket is closed in ltd's sink, a process of
// nobody's, and every other user is served meanwhile.
TEST_F(Dos, ARelayedClientsDescriptorIsClosedInASinkNotInLtd) {
  ASSERT_TRUE(d_.Start({"--fd-relay", "yes"})) << d_.log();
  const std::string go_on = d_.state_dir() + "/../go-on";
  // `s`, the peer that never reads, stays open until the test is done.
  const std::string client = kLingeringSocket + R"(
u = socket.socket(socket.AF_UNIX)
u.connect(sys.argv[1])
socket.send_fds(u, [b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"], [c.fileno()])
c.close()  # ltd's copy is the last
u.settimeout(20)
try:
    print("ended" if u.recv(4096) == b"" else "answered", flush=True)
except OSError as e:
    print("ended:", e.strerror, flush=True)
deadline = time.time() + 60
while not os.path.exists(sys.argv[2]) and time.time() < deadline:
    time.sleep(0.05)
)";
  CmdResult r;
  std::thread attacker([&] {
    r = RunCommandAs(a_->As(), {"/usr/bin/python3", "-c", client, d_.socket(), go_on},
                     {"HOME=" + a_->home()}, 90s);
  });
  const bool logged = WaitFor([&] { return Has(d_.log(), "sent 1 file descriptor(s)"); }, 20s);
  EXPECT_TRUE(logged) << d_.log();
  // While the close waits in the sink, every user is served.
  ExpectOthersServed(3);
  CmdResult mine = CtlAs(*a_, {"ps"}, 20s);
  EXPECT_EQ(mine.exit_code, 0) << mine.err;
  const std::vector<pid_t> sinks = ChildrenNamed(d_.pid(), "ltd-fd-sink");
  EXPECT_EQ(sinks.size(), 1u);
  for (pid_t sink : sinks) EXPECT_TRUE(Has(StatusLine(sink, "Uid:"), "65534")) << sink;
  std::ofstream(go_on).put('\n');
  attacker.join();
  fs::remove(go_on);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Has(r.out, "ended")) << r.out << r.err;
}

// Connections of clients ltd holds open: its sockets that /proc/net/unix
// lists under ltd's socket path, the listening one aside.
int ClientConnections(pid_t pid, const std::string& path) {
  std::set<std::string> accepted;
  std::ifstream in("/proc/net/unix");
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string num, refs, protocol, flags, type, state, inode, at;
    if (!(f >> num >> refs >> protocol >> flags >> type >> state >> inode >> at)) continue;
    if (at == path && flags != "00010000") accepted.insert("socket:[" + inode + "]");
  }
  int n = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code rec;
    if (accepted.count(fs::read_symlink(it->path(), rec).string()) != 0) ++n;
  }
  return n;
}

// A relayed client is served as any other: a job's 20,000 lines through an
// attached submit, every one in order, and ltd holds no client's
// connection once its clients are gone.
TEST_F(Dos, ARelayedClientIsServedAsAnyOther) {
  ASSERT_TRUE(d_.Start({"--fd-relay", "yes"})) << d_.log();
  CmdResult run = CtlAs(*a_, {"submit", "--devices", "1", "--", child_, "print:20000"}, 60s);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(Count(run.out, "line "), 20000u) << run.out.substr(0, 2000);
  EXPECT_TRUE(Has(run.out, "line 19999 of 20000")) << run.out.substr(run.out.size() - 200);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(CtlAs(*b_, {"ps", "-a"}).exit_code, 0);
  EXPECT_TRUE(WaitFor([&] { return ClientConnections(d_.pid(), d_.socket()) == 0; }, 20s))
      << "ltd holds " << ClientConnections(d_.pid(), d_.socket())
      << " clients' connections: " << DescribeOpenFds(d_.pid());
}

}  // namespace
}  // namespace ltd::test
