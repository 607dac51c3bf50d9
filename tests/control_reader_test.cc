// The batched heartbeat reader on a real loop with real sockets: every
// byte reaches its fd's callback, EOF forgets the fd, a drain takes what is
// queued, and the loop closes clean afterwards.
#include "control_reader.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <map>

#include "loop.h"
#include "run_loop.h"

namespace ltd::test {
namespace {

using namespace std::chrono_literals;

class ControlReaderTest : public ::testing::Test {
 protected:
  void TearDown() override {
    reader_.reset();
    EXPECT_EQ(loop_.Close(), 0) << "a handle is left on the loop";
  }
  ~ControlReaderTest() override {
    for (int fd : writers_) close(fd);
  }

  // A connected pair; the reader gets one end, the test writes the other.
  int Add(std::string* into) {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    EXPECT_EQ(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
    auto id = reader_->Add(Fd(sv[0]), [into](std::string_view d) { into->append(d); });
    EXPECT_TRUE(id.ok());
    ids_.push_back(*id);
    writers_.push_back(sv[1]);
    return sv[1];
  }

  bool RunUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout = 5s) {
    return RunLoopUntil(loop_.get(), done, timeout, /*tick_ms=*/5);
  }

  Loop loop_;
  std::unique_ptr<ControlReader> reader_ = *ControlReader::Create(loop_.get());
  std::vector<ControlReader::Id> ids_;
  std::vector<int> writers_;
};

TEST_F(ControlReaderTest, EveryByteReachesItsFdsCallback) {
  std::map<int, std::string> got;
  std::map<int, std::string> sent;
  std::vector<int> fds;
  for (int i = 0; i < 50; ++i) fds.push_back(Add(&got[i]));
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 50; ++i) {
      const std::string line = "hb " + std::to_string(round) + "\n";
      ASSERT_EQ(write(fds[static_cast<size_t>(i)], line.data(), line.size()),
                static_cast<ssize_t>(line.size()));
      sent[i] += line;
    }
  }
  EXPECT_TRUE(RunUntil([&] { return got == sent; })) << got[0];
  EXPECT_GE(reader_->wakeups(), 1u);
}

TEST_F(ControlReaderTest, LargeBurstsArriveWhole) {
  std::string got;
  const int fd = Add(&got);
  const std::string chunk(200 * 1024, 'x');  // more than one read's buffer
  size_t written = 0;
  EXPECT_TRUE(RunUntil([&] {
    if (written < chunk.size()) {
      const ssize_t n = send(fd, chunk.data() + written, chunk.size() - written, MSG_DONTWAIT);
      if (n > 0) written += static_cast<size_t>(n);
    }
    return got.size() == chunk.size();
  }));
  EXPECT_EQ(got, chunk);
}

TEST_F(ControlReaderTest, DrainTakesWhatIsQueuedAndForgetsTheFd) {
  std::string got;
  const int fd = Add(&got);
  ASSERT_EQ(write(fd, "exec_failed x\n", 14), 14);
  reader_->DrainAndRemove(ids_[0]);  // no loop turn: read right now
  EXPECT_EQ(got, "exec_failed x\n");
  ASSERT_EQ(send(fd, "late\n", 5, MSG_NOSIGNAL), -1);  // the read end is closed
  EXPECT_EQ(errno, EPIPE);
  reader_->DrainAndRemove(ids_[0]);  // twice is fine
}

// The watchdog's call: whatever arrived is delivered at once, without the
// loop, from more fds than one epoll_wait returns.
TEST_F(ControlReaderTest, ReadNowDeliversEverythingThatArrived) {
  constexpr int kFds = 300;  // more than one epoll_wait of 256, under a 1,024-fd limit
  std::vector<std::string> got(kFds);
  for (int i = 0; i < kFds; ++i) {
    const int w = Add(&got[static_cast<size_t>(i)]);
    const std::string line = "hb " + std::to_string(i) + "\n";
    ASSERT_EQ(write(w, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  }
  reader_->ReadNow();
  for (int i = 0; i < kFds; ++i) {
    EXPECT_EQ(got[static_cast<size_t>(i)], "hb " + std::to_string(i) + "\n") << "fd " << i;
  }
}

// A writer faster than the byte budget is read at the budget's rate: what
// arrives by any moment is at most a second's budget plus the rate times
// the time since (an upper bound, which a slow machine only keeps further
// below), its writes meet a full pipe meanwhile, and nothing is lost.
TEST_F(ControlReaderTest, AFastWriterIsReadAtItsByteBudget) {
  constexpr double kRate = 64 * 1024;  // bytes a second
  reader_->set_bytes_per_second(kRate);
  std::string got;
  const auto start = std::chrono::steady_clock::now();
  const int fd = Add(&got);
  const int sndbuf = 16 * 1024;  // a pipe's worth, well under what it writes
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf), 0);
  const std::string chunk(16 * 1024, 'b');
  size_t written = 0;
  bool blocked = false;
  const size_t total = 3 * static_cast<size_t>(kRate);  // 3 budgets: > 2 s at the rate
  size_t most_over = 0;
  EXPECT_TRUE(RunUntil(
      [&] {
        while (written < total) {
          const ssize_t n =
              send(fd, chunk.data(), std::min(chunk.size(), total - written), MSG_DONTWAIT);
          if (n <= 0) {
            blocked = true;
            break;
          }
          written += static_cast<size_t>(n);
        }
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        // A coarse clock's tick of slack.
        const double allowed = kRate + kRate * (secs + 0.01);
        if (static_cast<double>(got.size()) > allowed) {
          most_over = std::max(most_over, got.size() - static_cast<size_t>(allowed));
        }
        return written == total && got.size() == total;
      },
      60s))
      << got.size() << " of " << written << " bytes read";
  EXPECT_EQ(most_over, 0u) << "read past the byte budget";
  EXPECT_TRUE(blocked) << "the writer never met a full pipe";
  EXPECT_EQ(got, std::string(total, 'b'));
}

TEST_F(ControlReaderTest, EofForgetsTheFd) {
  std::string a, b;
  const int fa = Add(&a);
  const int fb = Add(&b);
  close(fa);
  writers_.erase(writers_.begin());
  ASSERT_EQ(write(fb, "hb 1\n", 5), 5);
  EXPECT_TRUE(RunUntil([&] { return b == "hb 1\n"; }));
  reader_->DrainAndRemove(ids_[0]);  // gone at EOF already: nothing to do
  EXPECT_EQ(a, "");
}

}  // namespace
}  // namespace ltd::test
