#include "stack_text.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "str_util.h"

namespace ltd {
namespace {

constexpr size_t kMaxKernelThreads = 64;
constexpr size_t kMaxKernelFrames = 16;

std::string ReadSmall(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string text(4096, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// Kernel text is the kernel's, but a thread's comm is the user's: keep it
// printable and on one line.
std::string Printable(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  std::string out;
  for (char c : s) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  return out;
}

}  // namespace

char ThreadState(std::string_view stat) {
  // "PID (COMM) S ...": the comm is the user's and may hold ") ".
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos || close + 2 >= stat.size()) return 0;
  return stat[close + 2];
}

std::string GdbFrames(std::string_view out) {
  std::vector<std::string> threads;
  for (std::string_view line : Split(out, '\n')) {
    if (line.starts_with("Thread ") || (threads.empty() && line.starts_with("#")))
      threads.emplace_back();
    if (line.starts_with("#") || line.starts_with("Thread ")) {
      threads.back().append(line);
      threads.back().push_back('\n');
    }
  }
  std::stable_partition(threads.begin(), threads.end(),
                        [](const std::string& t) { return t.starts_with("Thread 1 "); });
  std::string frames;
  for (const std::string& t : threads) frames += t;
  return frames;
}

std::string EuStackFrames(std::string_view out, pid_t pid) {
  std::vector<std::string> threads;
  size_t main = std::string::npos;
  const std::string main_header = Cat("TID ", pid, ":");
  for (std::string_view line : Split(out, '\n')) {
    if (line.starts_with("TID ") && line.ends_with(":")) {
      if (line == main_header) main = threads.size();
      std::string_view tid = line.substr(4, line.size() - 5);
      threads.push_back(Cat("Thread ", tid, " (LWP ", tid, "):\n"));
    } else if (line.starts_with("#") && !threads.empty()) {
      threads.back().append(line);
      threads.back().push_back('\n');
    }
  }
  // Headers alone are no stack.
  bool any_frame = false;
  for (const std::string& t : threads) any_frame = any_frame || t.find("\n#") != std::string::npos;
  if (!any_frame) return "";
  if (main != std::string::npos && main != 0)
    std::rotate(threads.begin(), threads.begin() + main, threads.begin() + main + 1);
  std::string frames;
  for (const std::string& t : threads) frames += t;
  return frames;
}

std::string KernelFrames(std::string_view stack) {
  std::string out;
  size_t frames = 0;
  for (std::string_view line : Split(stack, '\n')) {
    if (line.empty()) continue;
    if (frames++ == kMaxKernelFrames) break;
    // "[<0>] futex_wait_queue+0x6c/0xa0": the address is always 0 to us.
    const size_t sym = line.find("] ");
    out += Cat("kernel:   ", Printable(sym == std::string_view::npos ? line : line.substr(sym + 2)),
               "\n");
  }
  return out;
}

std::string KernelView(pid_t pid, std::string_view proc_root) {
  return KernelViewOf(std::filesystem::path(proc_root) / std::to_string(pid), pid);
}

std::string KernelViewOf(const std::string& pid_dir, pid_t pid) {
  namespace fs = std::filesystem;
  const fs::path task = fs::path(pid_dir) / "task";
  std::error_code ec;
  std::vector<long> tids;
  for (fs::directory_iterator it(task, ec), end; !ec && it != end; it.increment(ec)) {
    char* rest = nullptr;
    const std::string name = it->path().filename().string();
    const long tid = std::strtol(name.c_str(), &rest, 10);
    if (rest != nullptr && *rest == '\0' && tid > 0) tids.push_back(tid);
  }
  std::sort(tids.begin(), tids.end());
  // The main thread first, as in the frames.
  std::stable_partition(tids.begin(), tids.end(), [&](long t) { return t == pid; });
  std::string out;
  size_t shown = 0;
  for (long tid : tids) {
    if (shown++ == kMaxKernelThreads) {
      out += Cat("kernel: ", tids.size() - kMaxKernelThreads, " more threads\n");
      break;
    }
    const fs::path dir = task / std::to_string(tid);
    std::string wchan = Printable(ReadSmall(dir / "wchan"));
    if (wchan.empty() || wchan == "0") wchan = "running";
    const std::string state = StateWords(ThreadState(ReadSmall(dir / "stat")));
    out += Cat("kernel: thread ", tid, " (", Printable(ReadSmall(dir / "comm")), ") in ", wchan,
               state.empty() ? "" : ", state ", state, "\n");
    // Held here: the frames are views into it.
    const std::string stack = ReadSmall(dir / "stack");
    out += KernelFrames(stack);
  }
  return out;
}

}  // namespace ltd
