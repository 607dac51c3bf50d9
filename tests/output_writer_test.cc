// --output files on a file system that stops answering (a hung NFS server,
// a user's FUSE mount): the helper that writes them stops reading its pipe,
// and neither the supervisor's loop nor its writer thread waits on it past
// the flush deadline. A pipe that nobody reads stands in for that helper.
#include "output_writer.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "fd.h"
#include "gtest/gtest.h"
#include "harness.h"
#include "protocol.h"
#include "user_files.h"

namespace ltd {
namespace {

using test::WaitFor;

// The helper's side: its frames pipe, read here or by nobody.
class FakeSink final : public UserFileSink {
 public:
  FakeSink() {
    int fds[2];
    EXPECT_EQ(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
    read_end.reset(fds[0]);
    write_end_.reset(fds[1]);
  }
  int fd() const override { return write_end_.get(); }
  bool Finish(std::chrono::steady_clock::time_point deadline) override {
    *finished_at = deadline;
    write_end_.reset();
    return true;
  }
  Fd read_end;
  std::shared_ptr<std::chrono::steady_clock::time_point> finished_at =
      std::make_shared<std::chrono::steady_clock::time_point>();

 private:
  Fd write_end_;
};

// Reads the frames in the pipe now (non-blocking), appending file 0's
// bytes to `*got`; `*partial` keeps a frame cut by the pipe.
void ReadFrames(int fd, std::string* partial, std::string* got) {
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    partial->append(buf, static_cast<size_t>(n));
  }
  while (partial->size() >= sizeof(userio::FrameHeader)) {
    userio::FrameHeader h;
    memcpy(&h, partial->data(), sizeof h);
    if (partial->size() < sizeof h + h.length) break;
    EXPECT_EQ(h.file, 0u);
    got->append(*partial, sizeof h, h.length);
    partial->erase(0, sizeof h + h.length);
  }
}

TEST(OutputWriterTest, AFileThatStopsTakingWritesNeverBlocksTheCallerAndSaysWhatWasLost) {
  auto sink = std::make_unique<FakeSink>();
  const int read_end = sink->read_end.get();
  Fd keep(std::move(sink->read_end));
  auto writer = OutputWriter::Create(std::move(sink), {"/nfs/out.log"},
                                     /*max_queued_bytes=*/256 * 1024);
  ASSERT_TRUE(writer.ok()) << writer.status();
  // Far more than the pipe (64 KiB) and the queue hold: a Queue that
  // waited for the file would never return here.
  const std::string chunk(16 * 1024 - 1, 'x');
  for (int i = 0; i < 200; ++i) (*writer)->Queue(0, chunk + "\n");
  EXPECT_GT((*writer)->dropped(), 0u) << "nothing was dropped: did Queue wait for the file?";
  // The helper reads again: what was lost is said where it was lost.
  std::string partial, got;
  const uint64_t accepted = 200 * chunk.size() + 200 - (*writer)->dropped();
  ASSERT_TRUE(WaitFor(
      [&] {
        ReadFrames(read_end, &partial, &got);
        return got.size() >= accepted;  // every byte the queue took, written
      },
      std::chrono::seconds(10)));
  // The writer gives its batch's bytes back to the queue once the last of
  // them is in the pipe, a moment after the reader may have them: a line
  // queued in between is dropped (and counted), and is queued again.
  bool queued = false;
  ASSERT_TRUE(WaitFor(
      [&] {
        if (!queued) {
          const uint64_t dropped = (*writer)->dropped();
          (*writer)->Queue(0, "after the stall\n");
          queued = (*writer)->dropped() == dropped;
        }
        ReadFrames(read_end, &partial, &got);
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

// Lines dropped at the end, with no chunk after them to carry the notice:
// the file ends with it.
TEST(OutputWriterTest, DropsAtTheEndAreSaidAtTheFilesEnd) {
  auto sink = std::make_unique<FakeSink>();
  const int read_end = sink->read_end.get();
  Fd keep(std::move(sink->read_end));
  std::string partial, got;
  {
    auto writer = OutputWriter::Create(std::move(sink), {"/nfs/out.log"},
                                       /*max_queued_bytes=*/256 * 1024);
    ASSERT_TRUE(writer.ok()) << writer.status();
    const std::string chunk(16 * 1024 - 1, 'x');
    for (int i = 0; i < 200; ++i) (*writer)->Queue(0, chunk + "\n");
    ASSERT_GT((*writer)->dropped(), 0u);
    // The helper reads again while the writer ends (its flush deadline).
    std::thread reader([&] {
      WaitFor(
          [&] {
            ReadFrames(read_end, &partial, &got);
            return got.find("written too slowly\n") != std::string::npos;
          },
          std::chrono::seconds(5));
    });
    writer->reset();
    reader.join();
  }
  ReadFrames(read_end, &partial, &got);
  const std::string notice = " bytes of output dropped here: this file was written too slowly\n";
  ASSERT_GT(got.size(), notice.size());
  EXPECT_EQ(got.substr(got.size() - notice.size()), notice) << got.substr(got.size() - 200);
}

TEST(OutputWriterTest, ItsEndDoesNotWaitForAHelperThatNeverReads) {
  auto sink = std::make_unique<FakeSink>();
  Fd keep(std::move(sink->read_end));  // open, never read: the helper is stuck
  auto finished_at = sink->finished_at;
  const auto start = std::chrono::steady_clock::now();
  {
    auto writer = OutputWriter::Create(std::move(sink), {"/nfs/out.log"});
    ASSERT_TRUE(writer.ok()) << writer.status();
    (*writer)->Queue(0, std::string(1024 * 1024, 'x'));  // more than the pipe takes
    // Returns by its flush deadline: it would wait for ever otherwise.
  }
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, OutputWriter::kFlushDeadline + std::chrono::seconds(2));
  // The helper was given the flush deadline to finish by, then left.
  EXPECT_GT(*finished_at, start);
  EXPECT_LE(*finished_at, start + took);
}

}  // namespace
}  // namespace ltd
