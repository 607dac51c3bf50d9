// The relay of ltd's clients' connections (ClientRelay) and its sink of
// descriptors (FdSink): bytes go both ways in order and whole, ends are
// passed on, and a descriptor a client sends is closed in the sink, never
// on the relay's thread, which goes on serving the others.
#include "client_relay.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "harness.h"
#include "spare_wire.h"

namespace ltd::test {
namespace {

using namespace std::chrono_literals;

// A client's socket and the relay's end of it for gRPC.
struct Relayed {
  Fd user;
  Fd grpc;
};

Relayed Connect(ClientRelay& relay, uid_t uid = 4242) {
  int sv[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  Relayed r;
  r.user.reset(sv[0]);
  auto end = relay.Take(Fd(sv[1]), uid);
  EXPECT_TRUE(end.ok()) << end.status();
  if (end.ok()) r.grpc = std::move(*end);
  // Blocking here, for the tests' plain reads and writes (gRPC polls it).
  (void)fcntl(r.grpc.get(), F_SETFL, 0);
  return r;
}

// Up to `n` bytes from `fd`, waiting up to `within` for each; "" at its end.
std::string ReadSome(int fd, size_t n, std::chrono::milliseconds within = 10s) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(within.count())) <= 0) return "(nothing within the deadline)";
  std::string buf(n, '\0');
  const ssize_t got = read(fd, buf.data(), n);
  if (got < 0) return std::string("(error: ") + std::strerror(errno) + ")";
  buf.resize(static_cast<size_t>(got));
  return buf;
}

// A TCP socket whose last close waits an hour: its send queue full, set
// to linger, its peer (`peer`, kept open) never reading.
struct Lingering {
  Fd sock;
  Fd peer;
};
Lingering MakeLingering() {
  Fd l(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(l.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(listen(l.get(), 1), 0);
  socklen_t len = sizeof a;
  EXPECT_EQ(getsockname(l.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  Lingering out;
  out.sock.reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  EXPECT_EQ(connect(out.sock.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ||
                errno == EINPROGRESS,
            true);
  out.peer.reset(accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC));
  EXPECT_TRUE(out.peer.valid());
  pollfd p{out.sock.get(), POLLOUT, 0};
  EXPECT_EQ(poll(&p, 1, 5000), 1);
  std::string chunk(65536, 'x');
  while (send(out.sock.get(), chunk.data(), chunk.size(), MSG_DONTWAIT) > 0) {
  }
  linger lg{1, 3600};
  EXPECT_EQ(setsockopt(out.sock.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
  return out;
}

// Sends `fd` over `over` as a client would (spare_wire's framing will do).
bool SendFd(int over, int fd) { return SendJob(over, "x", fd).ok(); }

// The Uid: line of /proc/PID/status; "" once the process is gone.
std::string UidLine(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("Uid:")) return line;
  }
  return "";
}

TEST(ClientRelay, BytesGoBothWaysAndEachEndIsPassedOn) {
  auto relay = ClientRelay::Start();
  ASSERT_TRUE(relay.ok()) << relay.status();
  Relayed r = Connect(**relay);
  ASSERT_EQ(write(r.user.get(), "ask", 3), 3);
  EXPECT_EQ(ReadSome(r.grpc.get(), 16), "ask");
  ASSERT_EQ(write(r.grpc.get(), "answer", 6), 6);
  EXPECT_EQ(ReadSome(r.user.get(), 16), "answer");
  // The client's end of writing reaches gRPC; gRPC's close reaches the client.
  ASSERT_EQ(shutdown(r.user.get(), SHUT_WR), 0);
  EXPECT_EQ(ReadSome(r.grpc.get(), 16), "");
  r.grpc.reset();
  EXPECT_EQ(ReadSome(r.user.get(), 16), "");
  EXPECT_TRUE(WaitFor([&] { return (*relay)->connections() == 0; }, 10s))
      << (*relay)->connections();
  EXPECT_EQ((*relay)->sink_batches(), 0u) << "a connection read to its end goes to no sink";
}

// gRPC's close ends the connection though the client keeps its own open
// (as one that sent garbage, closed by gRPC, would, to pile up fds).
TEST(ClientRelay, GrpcsCloseEndsTheConnectionWhetherOrNotTheClientCloses) {
  auto relay = ClientRelay::Start();
  ASSERT_TRUE(relay.ok()) << relay.status();
  Relayed r = Connect(**relay);
  ASSERT_EQ(write(r.grpc.get(), "bye", 3), 3);
  r.grpc.reset();
  EXPECT_EQ(ReadSome(r.user.get(), 16), "bye");
  EXPECT_EQ(ReadSome(r.user.get(), 16), "");
  EXPECT_TRUE(WaitFor([&] { return (*relay)->connections() == 0; }, 10s))
      << (*relay)->connections();
  // Nothing was left unread in the client's socket: closed by the relay,
  // not handed to the sink.
  EXPECT_EQ((*relay)->sink_batches(), 0u);
}

// 16 MiB each way at once, the client reading slowly: every byte, in order.
TEST(ClientRelay, ASlowReaderGetsEveryByteInOrder) {
  auto relay = ClientRelay::Start();
  ASSERT_TRUE(relay.ok()) << relay.status();
  Relayed r = Connect(**relay);
  constexpr size_t kBytes = 16 << 20;
  auto pattern = [](size_t i) { return static_cast<char>('a' + (i * 7 + i / 4096) % 26); };
  auto writer = [&](int fd) {
    std::string buf(kBytes, '\0');
    for (size_t i = 0; i < kBytes; ++i) buf[i] = pattern(i);
    for (size_t at = 0; at < kBytes;) {
      const ssize_t k = write(fd, buf.data() + at, std::min<size_t>(kBytes - at, 100000));
      if (k <= 0) return;
      at += static_cast<size_t>(k);
    }
    (void)shutdown(fd, SHUT_WR);
  };
  auto reader = [&](int fd, bool slow, size_t* good) {
    std::string buf(8192, '\0');
    for (size_t at = 0;;) {
      const ssize_t k = read(fd, buf.data(), buf.size());
      if (k <= 0) return;
      for (ssize_t i = 0; i < k; ++i, ++at) {
        if (buf[static_cast<size_t>(i)] != pattern(at)) return;
        *good = at + 1;
      }
      if (slow && at % (1 << 20) < 8192) std::this_thread::sleep_for(20ms);
    }
  };
  size_t up = 0, down = 0;
  std::thread w1(writer, r.user.get()), w2(writer, r.grpc.get());
  std::thread r1(reader, r.grpc.get(), false, &up), r2(reader, r.user.get(), true, &down);
  w1.join();
  w2.join();
  r1.join();
  r2.join();
  EXPECT_EQ(up, kBytes);
  EXPECT_EQ(down, kBytes);
}

// A client that sends a descriptor whose close waits an hour: its
// connection is ended, the descriptor goes to the sink (a process of
// nobody's), and the relay goes on serving another client at once.
TEST(ClientRelay, ADescriptorSentIsClosedInTheSinkAndTheOthersAreServed) {
  auto relay = ClientRelay::Start();
  ASSERT_TRUE(relay.ok()) << relay.status();
  Relayed bad = Connect(**relay);
  Relayed good = Connect(**relay);
  Lingering lingering = MakeLingering();
  ASSERT_TRUE(SendFd(bad.user.get(), lingering.sock.get()));
  lingering.sock.reset();  // the relay's copy, wherever it went, is the last
  EXPECT_EQ(ReadSome(bad.user.get(), 16), "");
  EXPECT_TRUE(WaitFor([&] { return (*relay)->sink_batches() >= 1; }, 10s));
  ASSERT_TRUE(WaitFor([&] { return (*relay)->sink_pid() != 0; }, 10s));
  const pid_t sink = (*relay)->sink_pid();
  EXPECT_TRUE(WaitFor([&] { return Has(UidLine(sink), "65534\t65534\t65534\t65534"); }, 10s))
      << UidLine(sink);
  // Were that close on the relay's thread, this would wait an hour.
  ASSERT_EQ(write(good.user.get(), "still", 5), 5);
  EXPECT_EQ(ReadSome(good.grpc.get(), 16, 5s), "still");
  ASSERT_EQ(write(good.grpc.get(), "served", 6), 6);
  EXPECT_EQ(ReadSome(good.user.get(), 16, 5s), "served");
  relay->reset();  // kills and reaps the sink, stuck as it is
  EXPECT_TRUE(WaitFor([&] { return UidLine(sink).empty(); }, 10s)) << "sink " << sink << " lives";
}

// A sink stuck in a close takes nothing more: after a second with what it
// was sent unread, it is killed and another takes its place.
TEST(ClientRelay, AStuckSinkIsReplaced) {
  auto relay = ClientRelay::Start();
  ASSERT_TRUE(relay.ok()) << relay.status();
  Lingering first = MakeLingering();
  Relayed a = Connect(**relay);
  ASSERT_TRUE(SendFd(a.user.get(), first.sock.get()));
  first.sock.reset();
  ASSERT_TRUE(WaitFor([&] { return (*relay)->sink_pid() != 0; }, 10s));
  const pid_t stuck = (*relay)->sink_pid();
  // Another client's descriptor waits behind the stuck close.
  Fd pipe_ends[2];
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  pipe_ends[0].reset(p[0]);
  pipe_ends[1].reset(p[1]);
  Relayed b = Connect(**relay);
  ASSERT_TRUE(SendFd(b.user.get(), pipe_ends[1].get()));
  pipe_ends[1].reset();
  // Closed once a new sink inherits it: the pipe's reader sees its end.
  EXPECT_EQ(ReadSome(pipe_ends[0].get(), 16, 15s), "");
  EXPECT_TRUE(WaitFor([&] { return (*relay)->sink_pid() != stuck; }, 10s));
  EXPECT_TRUE(WaitFor([&] { return UidLine(stuck).empty(); }, 10s))
      << "the stuck sink " << stuck << " was not killed and reaped";
}

// A sink killed by someone else is replaced, and what comes after is
// closed as before.
TEST(ClientRelay, ASinkKilledFromOutsideIsReplaced) {
  auto relay = ClientRelay::Start();
  ASSERT_TRUE(relay.ok()) << relay.status();
  ASSERT_TRUE(WaitFor([&] { return (*relay)->sink_pid() != 0; }, 10s));
  const pid_t first = (*relay)->sink_pid();
  ASSERT_EQ(kill(first, SIGKILL), 0);
  EXPECT_TRUE(
      WaitFor([&] { return (*relay)->sink_pid() != first && (*relay)->sink_pid() != 0; }, 10s));
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  Fd reader(p[0]);
  Fd writer(p[1]);
  Relayed r = Connect(**relay);
  ASSERT_TRUE(SendFd(r.user.get(), writer.get()));
  writer.reset();
  EXPECT_EQ(ReadSome(reader.get(), 16, 10s), "");
  EXPECT_TRUE(WaitFor([&] { return UidLine(first).empty(); }, 10s)) << "sink " << first;
}

}  // namespace
}  // namespace ltd::test
