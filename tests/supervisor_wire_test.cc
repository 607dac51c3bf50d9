// The supervisor protocol's wire (proto/shim.proto, api_version 2): the
// frame reader, lt-shim's SupervisorServer against bytes that are no call,
// and ltd's FramedShimChannel against a supervisor that does not answer,
// hangs up, or answers past the bound. Real sockets, one libuv loop on a
// thread of the test.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <future>
#include <thread>

#include "fakes.h"
#include "fd.h"
#include "framed_shim_channel.h"
#include "harness.h"
#include "loop.h"
#include "shim_frames.h"
#include "shim_service.h"
#include "supervisor_server.h"

namespace ltd::test {
namespace {

namespace pb = shim::v1;
using namespace std::chrono_literals;

std::string Frame(const pb::Call& call) {
  std::string out;
  EXPECT_TRUE(AppendFrame(call, &out));
  return out;
}

std::string LengthOnly(uint32_t n) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

TEST(FrameReader, FramesSplitAnywhereComeOutWhole) {
  pb::Call a;
  a.set_id(1);
  a.mutable_hello();
  pb::Call b;
  b.set_id(2);
  b.mutable_kill()->set_why(std::string(1000, 'w'));
  const std::string bytes = Frame(a) + LengthOnly(0) + Frame(b);
  FrameReader reader(kMaxCallFrame);
  std::vector<std::string> got;
  for (char c : bytes) {  // a byte a read
    reader.Feed(std::string_view(&c, 1));
    std::string_view frame;
    while (reader.Next(&frame) == FrameReader::Got::kFrame) got.emplace_back(frame);
  }
  ASSERT_EQ(got.size(), 3u);
  pb::Call back;
  ASSERT_TRUE(back.ParseFromString(got[0]));
  EXPECT_EQ(back.id(), 1u);
  EXPECT_EQ(got[1], "");
  ASSERT_TRUE(back.ParseFromString(got[2]));
  EXPECT_EQ(back.kill().why(), std::string(1000, 'w'));
  EXPECT_EQ(reader.buffered(), 0u);
}

TEST(FrameReader, ALengthOverTheBoundIsRefusedBeforeItsBytesCome) {
  FrameReader reader(16);
  reader.Feed(LengthOnly(17));
  std::string_view frame;
  EXPECT_EQ(reader.Next(&frame), FrameReader::Got::kTooLarge);
  FrameReader exact(16);
  exact.Feed(LengthOnly(16) + std::string(15, 'x'));
  EXPECT_EQ(exact.Next(&frame), FrameReader::Got::kMore);
  exact.Feed("x");
  EXPECT_EQ(exact.Next(&frame), FrameReader::Got::kFrame);
  EXPECT_EQ(frame, std::string(16, 'x'));
}

// A loop on a thread, and a temp dir for sockets.
class Wire : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lt-wire-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    thread_ = std::thread([this] { loop_.Run(); });
  }
  void TearDown() override {
    OnLoop([&] {
      channel_.reset();
      server_.reset();
      service_.reset();
    });
    loop_.Post([this] { loop_.Stop(); });
    thread_.join();
    std::filesystem::remove_all(dir_);
  }
  void OnLoop(const std::function<void()>& fn) {
    std::promise<void> done;
    loop_.Post([&] {
      fn();
      done.set_value();
    });
    ASSERT_EQ(done.get_future().wait_for(20s), std::future_status::ready);
  }
  // A supervisor's server with no job begun: it answers Hello, and
  // refuses what needs a job.
  void Serve() {
    ShimService::Options so;
    so.job_id = "7";
    so.state_dir = dir_;
    service_ = std::make_unique<ShimService>(clock_, so);
    OnLoop([&] {
      server_ = std::make_unique<SupervisorServer>(loop_, *service_);
      ASSERT_TRUE(server_->Listen(socket_path()).ok());
    });
  }
  std::string socket_path() const { return dir_ + "/supervisor.sock"; }
  // On the loop: ltd's channel to socket_path(), watching; its events
  // counted in `events`, the watch's end said in `ended`.
  void ConnectAndWatch(int& events, std::promise<std::string>& ended) {
    channel_ = FramedShimChannel::Connect(loop_, socket_path());
    channel_->Watch([&events](const pb::Event&) { ++events; },
                    [&ended](std::string why) { ended.set_value(why); });
  }

  // A socket listening at `path` that never accepts by itself: a
  // supervisor that does not answer, or the test's own.
  static Fd Listener(const std::string& path) {
    Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        listen(fd.get(), 4) != 0) {
      return Fd();
    }
    return fd;
  }
  // A blocking client socket, connected to `path`.
  static Fd Dial(const std::string& path) {
    Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
        << std::strerror(errno);
    return fd;
  }
  static void Send(const Fd& fd, const std::string& bytes) {
    ASSERT_EQ(send(fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // The next answer on `fd`, within 10 s; nullopt: it hung up (or none came).
  static std::optional<pb::Answer> Read(const Fd& fd) {
    FrameReader reader(kMaxAnswerFrame);
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < give_up) {
      std::string_view frame;
      if (reader.Next(&frame) == FrameReader::Got::kFrame) {
        pb::Answer a;
        if (!a.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) return std::nullopt;
        return a;
      }
      pollfd p{fd.get(), POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = read(fd.get(), buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      reader.Feed(std::string_view(buf, static_cast<size_t>(n)));
    }
    return std::nullopt;
  }
  // The next `n` calls ltd sent on `fd` (blocking); fewer if it hung up or
  // sent something that is no call.
  static std::vector<pb::Call> ReadCalls(const Fd& fd, size_t n) {
    FrameReader reader(kMaxCallFrame);
    std::vector<pb::Call> calls;
    while (calls.size() < n) {
      char buf[4096];
      const ssize_t got = read(fd.get(), buf, sizeof buf);
      if (got <= 0) break;
      reader.Feed(std::string_view(buf, static_cast<size_t>(got)));
      std::string_view frame;
      while (reader.Next(&frame) == FrameReader::Got::kFrame) {
        if (!calls.emplace_back().ParseFromArray(frame.data(), static_cast<int>(frame.size()))) {
          calls.pop_back();
          return calls;
        }
      }
    }
    return calls;
  }
  // Whether the peer of `fd` closed it within 10 s.
  static bool HungUp(const Fd& fd) {
    return WaitFor(
        [&] {
          char c;
          return recv(fd.get(), &c, 1, MSG_DONTWAIT) == 0;
        },
        10s);
  }

  std::string dir_;
  Loop loop_;
  FakeClock clock_;
  std::thread thread_;
  std::unique_ptr<ShimService> service_;
  std::unique_ptr<SupervisorServer> server_;
  std::unique_ptr<ShimChannel> channel_;
};

TEST_F(Wire, TheServerAnswersHelloAndACallItDoesNotKnow) {
  Serve();
  Fd c = Dial(socket_path());
  pb::Call unknown;
  unknown.set_id(9);  // no call set: one of a later release
  Send(c, Frame(unknown));
  auto a = Read(c);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->id(), 9u);
  ASSERT_TRUE(a->has_failure());
  EXPECT_EQ(a->failure().code(), static_cast<int>(absl::StatusCode::kUnimplemented));
  pb::Call hello;
  hello.set_id(10);
  hello.mutable_hello();
  Send(c, Frame(hello));
  a = Read(c);
  ASSERT_TRUE(a.has_value() && a->has_hello());
  EXPECT_EQ(a->id(), 10u);
  EXPECT_EQ(a->hello().api_version(), 2u);
  EXPECT_EQ(a->hello().job_id(), "7");
  EXPECT_EQ(a->hello().pid(), getpid());
}

TEST_F(Wire, TheServerHangsUpOnBytesThatAreNoCall) {
  Serve();
  Fd garbage = Dial(socket_path());
  Send(garbage, LengthOnly(5) + "\xff\xff\xff\xff\xff");
  EXPECT_TRUE(HungUp(garbage));
  // A length past the bound: refused before its bytes come.
  Fd huge = Dial(socket_path());
  Send(huge, LengthOnly(kMaxCallFrame + 1));
  EXPECT_TRUE(HungUp(huge));
  // And it serves the next.
  Fd c = Dial(socket_path());
  pb::Call hello;
  hello.set_id(1);
  hello.mutable_hello();
  Send(c, Frame(hello));
  auto a = Read(c);
  EXPECT_TRUE(a.has_value() && a->has_hello());
}

TEST_F(Wire, TheServerTakesABoundedNumberOfConnections) {
  Serve();
  std::vector<Fd> held;
  for (size_t i = 0; i < SupervisorServer::kMaxConnections; ++i) {
    held.push_back(Dial(socket_path()));
  }
  pb::Call hello;
  hello.set_id(1);
  hello.mutable_hello();
  // The last of the bound is served (all are accepted by now)...
  Send(held.back(), Frame(hello));
  ASSERT_TRUE(Read(held.back()).has_value());
  // ...and one more is not.
  Fd extra = Dial(socket_path());
  EXPECT_TRUE(HungUp(extra));
  held.pop_back();  // room again
  ASSERT_TRUE(WaitFor(
      [&] {
        Fd c = Dial(socket_path());
        Send(c, Frame(hello));
        return Read(c).has_value();
      },
      10s));
}

TEST_F(Wire, ARefusedCallsFailureReachesLtdInItsOwnWords) {
  Serve();
  std::promise<absl::Status> killed;
  OnLoop([&] {
    channel_ = FramedShimChannel::Connect(loop_, socket_path());
    pb::KillRequest kill;
    channel_->Kill(kill,
                   [&](absl::StatusOr<pb::KillReply> got) { killed.set_value(got.status()); });
  });
  auto f = killed.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  const absl::Status s = f.get();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_EQ(s.message(), "the supervisor is starting");
}

// A supervisor that takes the call and never answers: the call ends at
// its deadline; one that hangs up: every call in flight ends at once.
TEST_F(Wire, ACallToASupervisorThatDoesNotAnswerEndsAtItsDeadline) {
  // Listens, accepts into the backlog, never reads.
  Fd listener = Listener(socket_path());
  ASSERT_TRUE(listener.valid());
  std::promise<absl::Status> stacked, killed;
  const auto start = std::chrono::steady_clock::now();
  OnLoop([&] {
    channel_ = FramedShimChannel::Connect(loop_, socket_path());
    pb::StackRequest stack;
    stack.set_budget_ms(100);  // answered within 2.1 s, or not at all
    channel_->Stack(stack,
                    [&](absl::StatusOr<pb::StackReply> got) { stacked.set_value(got.status()); });
  });
  auto f = stacked.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(absl::IsDeadlineExceeded(f.get()));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 2s);

  Fd accepted(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted.valid());
  OnLoop([&] {
    channel_->Kill(pb::KillRequest(),
                   [&](absl::StatusOr<pb::KillReply> got) { killed.set_value(got.status()); });
  });
  accepted.reset();  // it hangs up
  auto k = killed.get_future();
  ASSERT_EQ(k.wait_for(4s), std::future_status::ready) << "the call waited for its deadline";
  const absl::Status s = k.get();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_EQ(s.message(), "its connection closed");
}

// ltd lets go of a job's watch (its final record came) while a kill it
// sent is in flight: the supervisor's answer, which follows the final
// record the kill caused, still reaches the caller. Before, the watch's
// end closed the connection and the kill failed ("did not answer
// (cancelled)") though the job was killed.
TEST_F(Wire, ACallInFlightIsAnsweredAfterTheWatchIsCancelled) {
  Fd listener = Listener(socket_path());
  ASSERT_TRUE(listener.valid());
  std::promise<absl::Status> killed;
  std::promise<std::string> ended;
  OnLoop([&] {
    channel_ = FramedShimChannel::Connect(loop_, socket_path());
    channel_->Watch([](const pb::Event&) {}, [&](std::string why) { ended.set_value(why); });
    channel_->Kill(pb::KillRequest(),
                   [&](absl::StatusOr<pb::KillReply> got) { killed.set_value(got.status()); });
    channel_->Cancel();
  });
  auto e = ended.get_future();
  ASSERT_EQ(e.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(e.get(), "cancelled");
  Fd accepted(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted.valid());
  // The watch, then the kill; the kill is answered.
  const std::vector<pb::Call> calls = ReadCalls(accepted, 2);
  ASSERT_EQ(calls.size(), 2u);
  ASSERT_TRUE(calls[1].has_kill());
  pb::Answer answer;
  answer.set_id(calls[1].id());
  answer.mutable_kill();
  std::string bytes;
  ASSERT_TRUE(AppendFrame(answer, &bytes));
  Send(accepted, bytes);
  auto k = killed.get_future();
  ASSERT_EQ(k.wait_for(10s), std::future_status::ready);
  const absl::Status s = k.get();
  EXPECT_TRUE(s.ok()) << s;
  // And then ltd closes the connection.
  EXPECT_TRUE(HungUp(accepted));
}

// A supervisor answers a kill, sends its final record and hangs up; ltd,
// not having read them yet, sends another call and finds the connection
// gone (EPIPE). The answers already sent still reach their callers. Before,
// the failed write closed the connection at once: the kill, done, was
// reported as not answered ("its connection failed"), and the watch ended
// without its final record (Console.AStalledAttach... in the full suite).
TEST_F(Wire, WhatASupervisorSentBeforeItHungUpIsReadAfterAWriteFindsItGone) {
  signal(SIGPIPE, SIG_IGN);  // as ltd: the write fails with EPIPE instead
  Fd listener = Listener(socket_path());
  ASSERT_TRUE(listener.valid());
  std::promise<absl::Status> killed, output;
  std::promise<std::string> ended;
  int events = 0;
  OnLoop([&] {
    ConnectAndWatch(events, ended);
    channel_->Kill(pb::KillRequest(),
                   [&](absl::StatusOr<pb::KillReply> got) { killed.set_value(got.status()); });
  });
  Fd accepted(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted.valid());
  const std::vector<pb::Call> calls = ReadCalls(accepted, 2);
  ASSERT_EQ(calls.size(), 2u);
  ASSERT_TRUE(calls[0].has_watch());
  ASSERT_TRUE(calls[1].has_kill());
  // The loop is held in one turn while the supervisor answers and hangs
  // up, and ltd's next call then goes out: the write fails before the
  // loop looks at what came.
  OnLoop([&] {
    std::string bytes;
    pb::Answer kill;
    kill.set_id(calls[1].id());
    kill.mutable_kill();
    pb::Answer record;
    record.set_id(calls[0].id());
    record.mutable_event()->mutable_record();
    pb::Answer end;
    end.set_id(calls[0].id());
    end.mutable_watch_end();
    for (const pb::Answer* a : {&kill, &record, &end}) ASSERT_TRUE(AppendFrame(*a, &bytes));
    Send(accepted, bytes);
    accepted.reset();
    channel_->SetOutput(
        true, [&](absl::StatusOr<pb::SetOutputReply> got) { output.set_value(got.status()); });
  });
  auto k = killed.get_future();
  ASSERT_EQ(k.wait_for(10s), std::future_status::ready);
  const absl::Status ks = k.get();
  EXPECT_TRUE(ks.ok()) << ks;
  auto e = ended.get_future();
  ASSERT_EQ(e.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(e.get(), "") << "the watch ended before its final record";
  OnLoop([&] { EXPECT_EQ(events, 1); });
  auto o = output.get_future();
  ASSERT_EQ(o.wait_for(10s), std::future_status::ready);
  const absl::Status os = o.get();
  EXPECT_TRUE(absl::IsUnavailable(os)) << os;
  EXPECT_EQ(os.message(), "its connection closed");
}

TEST_F(Wire, AnAnswerPastTheBoundEndsTheWatch) {
  Fd listener = Listener(socket_path());
  ASSERT_TRUE(listener.valid());
  std::promise<std::string> ended;
  int events = 0;
  OnLoop([&] { ConnectAndWatch(events, ended); });
  Fd accepted(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted.valid());
  Send(accepted, LengthOnly(kMaxAnswerFrame + 1));
  auto f = ended.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), "it sent a frame over the bound");
  OnLoop([&] { EXPECT_EQ(events, 0); });
}

}  // namespace
}  // namespace ltd::test
