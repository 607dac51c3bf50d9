// What the stack tools and the kernel print, made into the hang report's
// layout: fed text the test owns, a /proc tree the test wrote, and this
// process's own threads as the kernel shows them.
#include "stack_text.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "str_util.h"

namespace ltd::test {
namespace {

namespace fs = std::filesystem;

// Split takes a string that outlives its parts, never one about to be
// destroyed (how the kernel frames once came out as freed heap).
template <typename T>
concept Splittable = requires(T&& s) {
  Split(std::forward<T>(s), ',');
};
static_assert(Splittable<const std::string&> && Splittable<std::string&>);
static_assert(Splittable<std::string_view> && Splittable<const char*>);
static_assert(!Splittable<std::string>, "a temporary string's parts would dangle");

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

TEST(StackText, EuStackSectionsBecomeThreadsMainFirst) {
  const std::string out =
      "PID 40 - process\nTID 41:\n#0  0x00007f futex_wait\n#1  0x00007f gloo::Pair::recv\n"
      "TID 40:\n#0  0x00007f clock_nanosleep\n#1  0x000055 injected_hang\n";
  EXPECT_EQ(EuStackFrames(out, 40),
            "Thread 40 (LWP 40):\n#0  0x00007f clock_nanosleep\n#1  0x000055 injected_hang\n"
            "Thread 41 (LWP 41):\n#0  0x00007f futex_wait\n#1  0x00007f gloo::Pair::recv\n");
  EXPECT_EQ(EuStackFrames("PID 40 - process\nTID 40:\n", 40), "") << "headers alone are no stack";
}

TEST(StackText, KernelFramesAreTheKernelsSymbolsWithoutAddresses) {
  EXPECT_EQ(KernelFrames("[<0>] hrtimer_nanosleep+0x9b/0x140\n[<0>] common_nsleep+0x3d/0xa0\n"),
            "kernel:   hrtimer_nanosleep+0x9b/0x140\nkernel:   common_nsleep+0x3d/0xa0\n");
  std::string deep;
  for (int i = 0; i < 20; ++i) deep += "[<0>] f" + std::to_string(i) + "+0x1/0x2\n";
  const std::string shown = KernelFrames(deep);
  EXPECT_EQ(std::count(shown.begin(), shown.end(), '\n'), 16) << shown;
  EXPECT_EQ(KernelFrames(""), "");
}

// Every thread of a process as /proc shows it: the frames of each thread
// are its own stack file's, byte for byte. (The views of the first frames
// once pointed into a string freed before they were read, and the first
// frame of a thread came out as heap bytes.)
TEST(StackText, KernelViewOfAProcTreePrintsEachThreadsOwnFrames) {
  const fs::path root = fs::temp_directory_path() / ("lt-stack-text-" + std::to_string(getpid()));
  fs::remove_all(root);
  const fs::path task = root / "40" / "task";
  Write(task / "40" / "comm", "python3\n");
  Write(task / "40" / "wchan", "hrtimer_nanosleep");
  Write(task / "40" / "stat", "40 (python3) S 1 40 40 0");
  Write(task / "40" / "stack",
        "[<0>] hrtimer_nanosleep+0x9b/0x140\n[<0>] common_nsleep_timens+0x3d/0xa0\n");
  Write(task / "41" / "comm", "pt_\x1b]0;x\n");
  Write(task / "41" / "wchan", "futex_wait_queue");
  Write(task / "41" / "stat", "41 (pt) ) S 1) S 1 40 40 0");
  Write(task / "41" / "stack",
        "[<0>] futex_wait_queue+0x6c/0xa0\n[<0>] futex_wait+0x162/0x260\n"
        "[<0>] do_futex+0x148/0x1e0\n");
  const std::string view = KernelView(40, root.string());
  fs::remove_all(root);
  EXPECT_EQ(view,
            "kernel: thread 40 (python3) in hrtimer_nanosleep, state S (sleeping)\n"
            "kernel:   hrtimer_nanosleep+0x9b/0x140\n"
            "kernel:   common_nsleep_timens+0x3d/0xa0\n"
            "kernel: thread 41 (pt_?]0;x) in futex_wait_queue, state S (sleeping)\n"
            "kernel:   futex_wait_queue+0x6c/0xa0\n"
            "kernel:   futex_wait+0x162/0x260\n"
            "kernel:   do_futex+0x148/0x1e0\n");
}

// This process with a second thread blocked in the kernel: every frame
// printed is in the kernel's "symbol+0xOFF/0xLEN" form, and the blocked
// thread's are exactly its stack file's (where the kernel shows stacks:
// root; elsewhere the wchan lines alone are checked).
TEST(StackText, KernelViewOfAThreadedProcessPrintsTheKernelsFrames) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t tid = 0;
  std::thread blocked([&] {
    __atomic_store_n(&tid, gettid(), __ATOMIC_SEQ_CST);
    pollfd p{fds[0], POLLIN, 0};
    poll(&p, 1, 60'000);
  });
  const fs::path task = "/proc/self/task";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string wchan;
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t t = __atomic_load_n(&tid, __ATOMIC_SEQ_CST);
    if (t != 0) wchan = Slurp(task / std::to_string(t) / "wchan");
    if (!wchan.empty() && wchan != "0") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::string stack = Slurp(task / std::to_string(tid) / "stack");
  const std::string view = KernelView(getpid());
  ASSERT_EQ(write(fds[1], "x", 1), 1);
  blocked.join();
  close(fds[0]);
  close(fds[1]);

  ASSERT_FALSE(wchan.empty() || wchan == "0") << "the thread never blocked";
  EXPECT_NE(view.find("kernel: thread " + std::to_string(getpid()) + " ("), std::string::npos)
      << view;
  const std::string header = "kernel: thread " + std::to_string(tid) + " (";
  const size_t at = view.find(header);
  ASSERT_NE(at, std::string::npos) << view;
  const std::regex frame(
      R"(kernel:   [A-Za-z0-9_.$]+\+0x[0-9a-f]+/0x[0-9a-f]+( \[[A-Za-z0-9_]+\])?)");
  std::istringstream lines(view);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("kernel:   ")) {
      EXPECT_TRUE(std::regex_match(line, frame)) << "not a kernel frame: " << line << "\n" << view;
    } else {
      EXPECT_TRUE(line.starts_with("kernel: thread ")) << line;
    }
  }
  if (stack.empty()) GTEST_SKIP() << "this kernel shows no stacks to this user; wchan only";
  const size_t body = view.find('\n', at) + 1;
  const size_t next = view.find("kernel: thread ", body);
  EXPECT_EQ(view.substr(body, next == std::string::npos ? std::string::npos : next - body),
            KernelFrames(stack))
      << view;
}

}  // namespace
}  // namespace ltd::test
