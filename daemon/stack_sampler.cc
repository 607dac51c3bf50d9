#include "stack_sampler.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "fd.h"

namespace ltd {
namespace {

// Runs gdb on one pid, its output capped, killed when the deadline passes.
std::string GdbStack(const std::string& gdb, pid_t pid, Millis budget) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return "";
  Fd rd(p[0]), wr(p[1]);
  const std::string pid_str = std::to_string(pid);
  const pid_t child = fork();
  if (child < 0) return "";
  if (child == 0) {
    dup2(wr.get(), STDOUT_FILENO);
    dup2(wr.get(), STDERR_FILENO);
    execl(gdb.c_str(), "gdb", "--batch", "--nx", "-p", pid_str.c_str(), "-ex", "set pagination off",
          "-ex", "thread apply all bt 30", static_cast<char*>(nullptr));
    _exit(127);
  }
  wr.reset();
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + budget;
  char buf[8192];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd pfd{rd.get(), POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t n = read(rd.get(), buf, sizeof buf);
    if (n <= 0) break;
    if (out.size() < 64 * 1024) out.append(buf, static_cast<size_t>(n));
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  // Keep the frames, drop gdb's chatter about symbols and threads.
  std::string frames;
  size_t start = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    std::string_view line(out.data() + start, end - start);
    if (line.starts_with("#") || line.starts_with("Thread ")) {
      frames.append(line);
      frames.push_back('\n');
    }
    start = end + 1;
  }
  return frames;
}

struct SampleWork {
  uv_work_t req{};
  std::string gdb;
  std::vector<pid_t> pids;
  Millis budget{0};
  std::vector<std::string> stacks;
  std::function<void(std::vector<std::string>)> done;
};

}  // namespace

bool IsPythonProcess(pid_t pid) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
  return !ec && exe.filename().string().starts_with("python");
}

UvStackSampler::UvStackSampler(uv_loop_t* loop) : loop_(loop) {
  for (const char* path : {"/usr/bin/gdb", "/usr/local/bin/gdb"}) {
    if (access(path, X_OK) == 0) {
      gdb_ = path;
      break;
    }
  }
}

void UvStackSampler::Sample(const std::vector<pid_t>& pids, Millis budget,
                            std::function<void(std::vector<std::string>)> done) {
  auto* work = new SampleWork;
  work->req.data = work;
  work->gdb = gdb_;
  work->pids = pids;
  work->budget = budget;
  work->done = std::move(done);
  uv_queue_work(
      loop_, &work->req,
      [](uv_work_t* req) {
        auto* w = static_cast<SampleWork*>(req->data);
        const auto deadline = std::chrono::steady_clock::now() + w->budget;
        w->stacks.resize(w->pids.size());
        for (size_t i = 0; i < w->pids.size(); ++i) {
          const auto left =
              std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
          if (w->gdb.empty() || left.count() <= 0 || w->pids[i] <= 0) continue;
          if (IsPythonProcess(w->pids[i])) continue;  // faulthandler covers it
          w->stacks[i] = GdbStack(w->gdb, w->pids[i], left);
        }
      },
      [](uv_work_t* req, int) {
        auto* w = static_cast<SampleWork*>(req->data);
        w->done(std::move(w->stacks));
        delete w;
      });
}

}  // namespace ltd
