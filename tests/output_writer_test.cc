// --output files on a file system that stops answering (a hung NFS server,
// a user's FUSE mount): neither the supervisor's loop nor ltd's API waits
// on it. A pipe that nobody reads stands in for such a file: a write to it
// blocks once it is full, as a write to the hung file system would.
#include "output_writer.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <csignal>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "harness.h"
#include "open_as_user.h"

namespace ltd {
namespace {

using test::WaitFor;

struct Pipe {
  Pipe() {
    int fds[2];
    EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
    read_end.reset(fds[0]);
    write_end.reset(fds[1]);
  }
  Fd read_end, write_end;
};

// Reads what is in the pipe now (non-blocking), appending it to `*got`.
void ReadAvailable(int fd, std::string* got) {
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return;
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return;
    got->append(buf, static_cast<size_t>(n));
  }
}

TEST(OutputWriterTest, AFileThatStopsTakingWritesNeverBlocksTheCallerAndSaysWhatWasLost) {
  Pipe pipe;
  auto writer = OutputWriter::Create(/*max_queued_bytes=*/256 * 1024);
  ASSERT_TRUE(writer.ok()) << writer.status();
  const size_t file = (*writer)->AddFile(std::move(pipe.write_end), "/nfs/out.log");
  // Far more than the pipe (64 KiB) and the queue hold: a Queue that
  // waited for the file would never return here.
  const std::string chunk(16 * 1024 - 1, 'x');
  for (int i = 0; i < 200; ++i) (*writer)->Queue(file, chunk + "\n");
  EXPECT_GT((*writer)->dropped(), 0u) << "nothing was dropped: did Queue wait for the file?";
  // The file takes writes again: what was lost is said where it was lost.
  std::string got;
  ASSERT_TRUE(WaitFor(
      [&] {
        ReadAvailable(pipe.read_end.get(), &got);
        return got.size() >= 256 * 1024 - 64 * 1024;  // the queue's worth, written
      },
      std::chrono::seconds(10)));
  (*writer)->Queue(file, "after the stall\n");
  ASSERT_TRUE(WaitFor(
      [&] {
        ReadAvailable(pipe.read_end.get(), &got);
        return got.find("after the stall\n") != std::string::npos;
      },
      std::chrono::seconds(10)));
  const size_t notice =
      got.find(" bytes of output dropped here: this file was written too slowly\n");
  ASSERT_NE(notice, std::string::npos);
  EXPECT_LT(notice, got.find("after the stall\n"));
  EXPECT_EQ(got.find_first_not_of("x\n"), got.rfind('\n', notice) + 1)
      << "the lines before the notice are the rank's";
}

TEST(OutputWriterTest, ItsEndDoesNotWaitForAFileThatNeverAnswers) {
  std::signal(SIGPIPE, SIG_IGN);  // the stuck write ends with EPIPE below
  Pipe pipe;
  {
    auto writer = OutputWriter::Create();
    ASSERT_TRUE(writer.ok()) << writer.status();
    const size_t file = (*writer)->AddFile(std::move(pipe.write_end), "/nfs/out.log");
    (*writer)->Queue(file, std::string(256 * 1024, 'x'));  // the thread blocks in write
    // Returns after its flush deadline: it would wait for ever otherwise.
  }
  pipe.read_end.reset();  // lets the thread left behind end
}

TEST(RunAsFileUserTest, AFileSystemThatNeverAnswersIsGivenUpOnAndBoundedPerUser) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: the calls run as another uid";
  constexpr uid_t kUid = 65531;  // no other test's
  Pipe gate;  // each call waits for a byte on it, as an open on a hung file system
  auto read_end = std::make_shared<Fd>(std::move(gate.read_end));
  const auto stuck = [read_end] {
    char c;
    return read(read_end->get(), &c, 1) == 1 ? absl::OkStatus() : absl::InternalError("read");
  };
  for (int i = 0; i < kMaxWaitingPerUser; ++i) {
    absl::Status s = RunAsFileUser(kUid, kUid, stuck, std::chrono::milliseconds(20));
    ASSERT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_NE(s.message().find("did not answer"), std::string::npos) << s;
  }
  // That user's next call is refused at once; another user's still runs.
  absl::Status refused = RunAsFileUser(kUid, kUid, [] { return absl::OkStatus(); });
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_NE(refused.message().find("still waiting"), std::string::npos) << refused;
  EXPECT_TRUE(RunAsFileUser(kUid + 1, kUid + 1, [] { return absl::OkStatus(); }).ok());
  // The file system answers: the user's calls run again.
  const std::string bytes(kMaxWaitingPerUser, 'g');
  ASSERT_EQ(write(gate.write_end.get(), bytes.data(), bytes.size()),
            static_cast<ssize_t>(bytes.size()));
  EXPECT_TRUE(
      WaitFor([&] { return RunAsFileUser(kUid, kUid, [] { return absl::OkStatus(); }).ok(); },
              std::chrono::seconds(10)));
}

}  // namespace
}  // namespace ltd
