// A spare supervisor's word with ltd (process/spare_wire.h), and what a
// supervisor must have let go of before it offers itself for another job
// (shim/spare.h).
#include "spare.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "fd.h"
#include "spare_wire.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LT_HAS_ASAN 1
#endif
#endif
#ifndef LT_HAS_ASAN
#define LT_HAS_ASAN 0
#endif

namespace ltd {
namespace {

std::pair<Fd, Fd> SeqPacket() {
  int p[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p), 0);
  return {Fd(p[0]), Fd(p[1])};
}

// `text` with `fds` attached, as no ltd would send it.
void SendRaw(int sock, const std::string& text, const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(text.data()), text.size()};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ASSERT_EQ(sendmsg(sock, &msg, MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
}

size_t OpenFds() {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                                           std::filesystem::directory_iterator{}));
}

TEST(SpareWire, AJobComesWithItsConnection) {
  auto [ltd, spare] = SeqPacket();
  auto [ours, theirs] = SeqPacket();
  ASSERT_TRUE(SendJob(ltd.get(), "18446744073709551615", theirs.get()).ok());
  std::optional<AssignedJob> job = ReceiveJob(spare.get());
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->id, "18446744073709551615");
  EXPECT_NE(fcntl(job->connection.get(), F_GETFD) & FD_CLOEXEC, 0);
  // The connection is the one ltd gave.
  ASSERT_EQ(write(ours.get(), "x", 1), 1);
  char c = 0;
  EXPECT_EQ(read(job->connection.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');
}

TEST(SpareWire, AnythingButOneIdAndOneConnectionIsNoJobAndLeavesNoFdOpen) {
  auto [ours, theirs] = SeqPacket();
  const int fd = theirs.get();
  const struct {
    std::string text;
    std::vector<int> fds;
  } cases[] = {
      {"42\n", {}},     {"42\n", {fd, fd}}, {"4x\n", {fd}},   {"42", {fd}},
      {"\n", {fd}},     {"-1\n", {fd}},     {"4\n2\n", {fd}}, {"123456789012345678901\n", {fd}},
      {"42\n\n", {fd}},
  };
  for (const auto& bad : cases) {
    auto [ltd, spare] = SeqPacket();
    const size_t before = OpenFds();
    SendRaw(ltd.get(), bad.text, bad.fds);
    EXPECT_FALSE(ReceiveJob(spare.get()).has_value()) << bad.text << " with " << bad.fds.size();
    EXPECT_EQ(OpenFds(), before) << bad.text << " with " << bad.fds.size();
  }
  // ltd gone: EOF.
  auto [ltd, spare] = SeqPacket();
  ltd.reset();
  EXPECT_FALSE(ReceiveJob(spare.get()).has_value());
}

TEST(SpareWire, LtdHearsFreeNothingOrGone) {
  auto [ltd, spare] = SeqPacket();
  EXPECT_EQ(ReadSpareWord(ltd.get()), SpareWord::kNothingYet);
  ASSERT_TRUE(SendFree(spare.get()));
  EXPECT_EQ(ReadSpareWord(ltd.get()), SpareWord::kFree);
  SendRaw(spare.get(), "freed\n", {});
  EXPECT_EQ(ReadSpareWord(ltd.get()), SpareWord::kGone);
  spare.reset();
  EXPECT_EQ(ReadSpareWord(ltd.get()), SpareWord::kGone);
  EXPECT_FALSE(SendFree(ltd.get()));  // its peer is gone: no SIGPIPE, false
}

// In a child of its own, whose fd 4 is the spare's socket: what a
// supervisor holds after its job decides whether it offers itself again.
// Returns a line of what went wrong, empty when all was as it should be.
std::string SpareChild(int socket, int report) {
  // Its fds as ltd starts it: 0, 1, 2 and 4 (and the report, far off).
  if (dup2(socket, Spare::kAssignFd) < 0) return "dup2";
  std::vector<int> others;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(e.path().filename());
    if (fd > STDERR_FILENO && fd != Spare::kAssignFd && fd != report) others.push_back(fd);
  }
  for (int fd : others) close(fd);
  char arg0[] = "lt-shim", arg1[] = "--job", arg2[] = "____________________";
  char* argv[] = {arg0, arg1, arg2, nullptr};
  Spare spare(3, argv, /*ltd_fd=*/3);
  auto job = spare.AwaitJob();
  if (!job || *job != "7") return "no job 7";
  if (std::strcmp(arg2, "7") != 0) return "--job does not show 7";
  close(3);  // the job's connection, as Run closes it
  // An fd of the job's left open.
  Fd left(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (spare.OfferAnother()) return "offered with an fd left";
  left.reset();
  // A thread left.
  {
    int go[2];
    if (pipe(go) != 0) return "pipe";
    std::thread t([&] {
      char c;
      (void)!read(go[0], &c, 1);
    });
    const bool offered = spare.OfferAnother();
    (void)!write(go[1], "x", 1);
    t.join();
    close(go[0]);
    close(go[1]);
    if (offered) return "offered with a thread left";
  }
  // A child left.
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  const bool offered = spare.OfferAnother();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  if (offered) return "offered with a child left";
  if (!spare.OfferAnother()) return "not offered, though clean";
  if (std::strcmp(arg2, "____________________") != 0) return "--job does not show the placeholder";
  // The same fds, one of them open on something else now.
  int other[2];
  if (pipe(other) != 0 || dup2(other[1], STDERR_FILENO) < 0) return "pipe";
  close(other[0]);
  close(other[1]);
  if (spare.OfferAnother()) return "offered with fd 2 open on another file";
  return "";
}

TEST(Spare, OffersItselfAgainOnlyWithNothingOfItsJobLeft) {
  auto [ltd, spare] = SeqPacket();
  int report[2];
  ASSERT_EQ(pipe2(report, O_CLOEXEC), 0);
  Fd report_read(report[0]), report_write(report[1]);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int report_fd = fcntl(report_write.get(), F_DUPFD_CLOEXEC, 100);
    const std::string what = SpareChild(spare.get(), report_fd);
    (void)!write(report_fd, what.data(), what.size());
    _exit(0);
  }
  spare.reset();
  report_write.reset();
  auto [ours, theirs] = SeqPacket();
  ASSERT_TRUE(SendJob(ltd.get(), "7", theirs.get()).ok());
  theirs.reset();
  std::string what;
  char buf[256];
  for (ssize_t n; (n = read(report_read.get(), buf, sizeof buf)) > 0;) what.append(buf, n);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_EQ(what, "");
  // It said "free" once: when it was clean.
  EXPECT_EQ(ReadSpareWord(ltd.get()), SpareWord::kFree);
  EXPECT_EQ(ReadSpareWord(ltd.get()), SpareWord::kGone);  // and exited since
}

// A child that is a spare as ltd starts one (fds 0 to 2, and 4: the
// spare's socket), living `life` on its Spare and exiting with what it
// returns. The parent's `spare` end is closed.
template <typename Life>
pid_t ForkSpare(Fd& ltd, Fd& spare, Life life) {
  const pid_t pid = fork();
  if (pid != 0) {
    spare.reset();
    return pid;
  }
  ltd.reset();
  if (dup2(spare.get(), Spare::kAssignFd) < 0) _exit(1);
  for (int fd = STDERR_FILENO + 1; fd < 1024; ++fd) {
    if (fd != Spare::kAssignFd) close(fd);
  }
  char arg0[] = "lt-shim", arg1[] = "--job", arg2[] = "__";
  char* argv[] = {arg0, arg1, arg2, nullptr};
  Spare self(3, argv, /*ltd_fd=*/3);
  _exit(life(self));
}

// Anonymous memory of `pid` in KiB (RssAnon), -1 when it cannot be read.
long RssAnonKib(pid_t pid) {
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/status").c_str(), "re");
  if (f == nullptr) return -1;
  long kib = -1;
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "RssAnon: %ld kB", &kib) == 1) break;
  }
  std::fclose(f);
  return kib;
}

// A free supervisor keeps its heap for the next job (given back after
// each one, it was faulted in again by the next), and gives it back once
// it has waited kTrimAfterMs with no job.
TEST(Spare, GivesItsHeapBackOnlyOnceNoJobCame) {
#if defined(__SANITIZE_ADDRESS__) || LT_HAS_ASAN
  GTEST_SKIP() << "AddressSanitizer's allocator holds freed memory in its quarantine, and "
                  "malloc_trim is glibc's";
#endif
  constexpr long kHeldKib = 16 << 10;
  auto [ltd, spare] = SeqPacket();
  const pid_t pid = ForkSpare(ltd, spare, [](Spare& self) {
    if (!self.AwaitJob()) return 2;
    close(3);
    // What a job left in the heap: freed, but below a chunk still in use,
    // so that only a trim gives it back.
    std::vector<char*> chunks;
    chunks.reserve(kHeldKib);
    for (long i = 0; i < kHeldKib; ++i) {
      chunks.push_back(static_cast<char*>(std::malloc(1000)));
      std::memset(chunks.back(), 1, 1000);
    }
    for (long i = 0; i + 1 < kHeldKib; ++i) std::free(chunks[i]);
    if (!self.OfferAnother()) return 3;
    self.AwaitJob();  // none comes: the test closes the socket
    return 0;
  });
  ASSERT_GE(pid, 0);
  auto [ours, theirs] = SeqPacket();
  ASSERT_TRUE(SendJob(ltd.get(), "7", theirs.get()).ok());
  theirs.reset();
  pollfd readable{ltd.get(), POLLIN, 0};
  ASSERT_EQ(poll(&readable, 1, 10000), 1) << "no word in 10 s";
  ASSERT_EQ(ReadSpareWord(ltd.get()), SpareWord::kFree);
  const long held = RssAnonKib(pid);
  EXPECT_GE(held, kHeldKib * 3 / 4) << "its heap was given back as soon as it was free";
  long now = held;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((now = RssAnonKib(pid)) >= held - kHeldKib / 2 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_LT(now, held - kHeldKib / 2)
      << "still " << now << " KiB of anonymous memory 10 s on, " << held << " KiB when it was free";
  ltd.reset();
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// However clean, a supervisor serves kMaxJobsServed jobs, then exits.
TEST(Spare, ServesAThousandJobsAtMost) {
  auto [ltd, spare] = SeqPacket();
  const pid_t pid = ForkSpare(ltd, spare, [](Spare& self) {
    while (self.OfferAnother()) {
    }
    return 0;
  });
  ASSERT_GE(pid, 0);
  int free = 0;
  for (;;) {
    pollfd readable{ltd.get(), POLLIN, 0};
    ASSERT_EQ(poll(&readable, 1, 10000), 1) << "no word in 10 s after " << free;
    const SpareWord word = ReadSpareWord(ltd.get());
    if (word == SpareWord::kGone) break;
    if (word == SpareWord::kFree && ++free > Spare::kMaxJobsServed) {
      kill(pid, SIGKILL);
      ADD_FAILURE() << "it offered itself again past " << Spare::kMaxJobsServed << " jobs";
      break;
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(free, Spare::kMaxJobsServed - 1) << "offers after its first job";
}

}  // namespace
}  // namespace ltd
