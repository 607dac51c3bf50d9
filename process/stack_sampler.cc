#include "stack_sampler.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <optional>

#include "duration.h"
#include "exec_shim_args.h"
#include "proc_dir.h"
#include "spdlog/spdlog.h"
#include "stack_helper.h"
#include "stack_text.h"
#include "str_util.h"

namespace ltd {
namespace {

using SteadyClock = std::chrono::steady_clock;
using Outcome = SampledStack::Outcome;

// At most this many tools at once; a bigger job's later ranks start as
// earlier ones finish (the stalled ranks come first), within the budget.
constexpr size_t kMaxConcurrent = 16;
// A tool that closed its output gets this long to exit before it is killed.
constexpr std::chrono::milliseconds kExitAfterOutput{300};
constexpr size_t kMaxStackBytes = 64 * 1024;

enum class Tool { kEuStack, kGdb };

std::string_view Name(Tool t) { return t == Tool::kEuStack ? "eu-stack" : "gdb"; }

std::vector<std::string> ToolArgv(const StackTools& tools, Tool tool, pid_t pid) {
  if (tool == Tool::kEuStack) return {tools.eu_stack, "-p", std::to_string(pid), "-n", "40"};
  return {tools.gdb,
          "--batch",
          "--nx",
          "-iex",
          "set auto-load off",
          "-iex",
          "set debuginfod enabled off",
          "-p",
          std::to_string(pid),
          "-ex",
          "set pagination off",
          "-ex",
          "set print frame-arguments none",
          "-ex",
          "set print address off",
          "-ex",
          "thread apply all bt 30"};
}

// One rank's sampling: the tools left to try, the one running.
struct Task {
  size_t index = 0;
  pid_t pid = 0;
  std::vector<Tool> tools;  // still to try, in order
  std::optional<Tool> running_tool;
  std::unique_ptr<StackHelper> helper;
  std::string failures;  // why earlier tools gave nothing
  bool done = false;
};

std::string FirstLine(std::string_view text) {
  std::string_view line = text.substr(0, text.find('\n'));
  if (line.size() > 200) line = line.substr(0, 200);
  std::string out;
  for (char c : line) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  return out;
}

void Finish(Task& t, SampledStack& s, Outcome outcome, std::string text, std::string note) {
  t.done = true;
  s.outcome = outcome;
  if (text.size() > kMaxStackBytes) text.resize(kMaxStackBytes);
  s.text = std::move(text) + s.text;  // the kernel's view stays below the frames
  s.note = std::move(note);
}

// Starts the next tool for `t`; false when none is left or none started.
bool StartNext(const StackHelper::Setup& setup, const StackTools& tools, Task& t) {
  while (!t.tools.empty()) {
    const Tool tool = t.tools.front();
    t.tools.erase(t.tools.begin());
    auto h = StackHelper::Start(setup, ToolArgv(tools, tool, t.pid));
    if (h.ok()) {
      t.helper = std::move(*h);
      t.running_tool = tool;
      return true;
    }
    t.failures += Cat(t.failures.empty() ? "" : "; ", Name(tool), ": ", h.status().message());
  }
  return false;
}

// The tool of `t` closed its output: it has said all it will.
void Collect(const StackHelper::Setup& setup, const StackTools& tools, Task& t, SampledStack& s) {
  StackHelper& h = *t.helper;
  if (!h.Reap(SteadyClock::now() + kExitAfterOutput)) {
    h.Kill();
    h.Reap(SteadyClock::now() + kExitAfterOutput);
  }
  const Tool tool = *t.running_tool;
  std::string frames =
      tool == Tool::kEuStack ? EuStackFrames(h.output(), t.pid) : GdbFrames(h.output());
  if (!frames.empty()) {
    t.helper.reset();
    return Finish(t, s, Outcome::kTaken, std::move(frames), std::string(Name(tool)));
  }
  t.failures += Cat(t.failures.empty() ? "" : "; ", Name(tool), " gave no frames (exit ",
                    h.exit_code(), "): ", FirstLine(h.output()));
  spdlog::debug("{} gave no stack for pid {}: {}", Name(tool), t.pid, h.output().substr(0, 500));
  t.helper.reset();
  if (!StartNext(setup, tools, t)) Finish(t, s, Outcome::kFailed, "", t.failures);
}

}  // namespace

StackTools StackTools::Installed() {
  StackTools t;
  for (const char* path : {"/usr/bin/eu-stack", "/usr/local/bin/eu-stack"}) {
    if (access(path, X_OK) == 0) {
      t.eu_stack = path;
      break;
    }
  }
  for (const char* path : {"/usr/bin/gdb", "/usr/local/bin/gdb"}) {
    if (access(path, X_OK) == 0) {
      t.gdb = path;
      break;
    }
  }
  return t;
}

bool IsPythonProcess(pid_t pid) {
  const std::optional<ProcDir> dir = ProcDir::Open(pid);
  if (!dir) return false;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink(dir->path() + "/exe", ec);
  return !ec && exe.filename().string().starts_with("python");
}

std::vector<SampledStack> TakeStacks(const StackTools& tools, const std::string& exec_shim,
                                     const Credentials& who, const std::vector<pid_t>& pids,
                                     Millis budget) {
  const auto start = SteadyClock::now();
  const auto deadline = start + budget;
  std::vector<SampledStack> stacks(pids.size());
  // Each process held while its stack is taken: what is read of /proc is
  // its, and a tool's frames count only if it was still there (not
  // reaped, so its pid was not another's) once the tool ended.
  std::vector<std::optional<ProcDir>> held(pids.size());
  std::vector<std::string> kernel(pids.size());
  std::vector<Tool> order;
  if (!tools.eu_stack.empty()) order.push_back(Tool::kEuStack);
  if (!tools.gdb.empty()) order.push_back(Tool::kGdb);
  std::vector<Task> tasks;
  for (size_t i = 0; i < pids.size(); ++i) {
    if (pids[i] <= 0) continue;
    held[i] = ProcDir::Open(pids[i]);
    if (!held[i]) {
      stacks[i].outcome = Outcome::kFailed;
      stacks[i].note = "the process was gone";
      continue;
    }
    // The kernel's view first: it is the state at the hang, and costs no tool.
    stacks[i].text = kernel[i] = KernelViewOf(held[i]->path(), pids[i]);
    if (order.empty()) {
      stacks[i].note = "neither eu-stack nor gdb is installed";
      continue;
    }
    tasks.push_back(Task{i, pids[i], order, std::nullopt, nullptr, "", false});
  }
  if (tasks.empty()) return stacks;
  StackHelper::Setup setup{exec_shim, who.uid, who.gid, {}};
  // The job's groups; or NSS, which may be slow (LDAP): here, off the
  // loop, once for every tool. None found: the primary group alone.
  if (who.uid != geteuid() || who.gid != getegid()) {
    setup.groups =
        who.groups ? *who.groups : LoginGroups(who.uid, who.gid).value_or(std::vector<gid_t>{});
  }

  size_t next = 0;  // the first task not started yet
  auto running = [&] {
    size_t n = 0;
    for (const Task& t : tasks) n += t.helper != nullptr;
    return n;
  };
  for (;;) {
    while (next < tasks.size() && running() < kMaxConcurrent) {
      Task& t = tasks[next++];
      if (!StartNext(setup, tools, t)) Finish(t, stacks[t.index], Outcome::kFailed, "", t.failures);
    }
    std::vector<pollfd> fds;
    std::vector<Task*> polled;
    for (Task& t : tasks) {
      if (t.helper == nullptr) continue;
      fds.push_back({t.helper->out_fd(), POLLIN, 0});
      polled.push_back(&t);
    }
    if (fds.empty() && next >= tasks.size()) break;
    const auto left = std::chrono::duration_cast<Millis>(deadline - SteadyClock::now());
    if (left.count() <= 0) break;
    const int ready = poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;  // SIGCHLD from a tool that finished
    if (ready <= 0) break;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      Task& t = *polled[k];
      t.helper->ReadSome();
      if (!t.helper->output_open()) Collect(setup, tools, t, stacks[t.index]);
    }
  }
  const auto spent = std::chrono::duration_cast<Millis>(SteadyClock::now() - start);
  // Every tool still at it is killed first, then all are reaped against
  // one deadline: a few wedged ones cost that deadline once, not each.
  for (Task& t : tasks) {
    if (!t.done && t.helper != nullptr) t.helper->Kill();
  }
  const auto reap_by = SteadyClock::now() + kExitAfterOutput;
  for (Task& t : tasks) {
    if (!t.done && t.helper != nullptr) t.helper->Reap(reap_by);
  }
  for (Task& t : tasks) {
    if (t.done) continue;
    SampledStack& s = stacks[t.index];
    if (t.helper != nullptr) {
      // Still at it past the budget: killed and reaped (or given up on)
      // above, never waited for beyond that deadline.
      const std::string_view tool = Name(*t.running_tool);
      t.helper.reset();
      Finish(t, s, Outcome::kTimedOut, "",
             Cat(tool, " was still running when the ", FormatDuration(budget), " budget ran out (",
                 spent.count(), "ms): killed"));
    } else {
      Finish(t, s, Outcome::kTimedOut, "",
             Cat("not started within the ", FormatDuration(budget), " budget"));
    }
  }
  for (size_t i = 0; i < stacks.size(); ++i) {
    if (held[i] && stacks[i].outcome == Outcome::kTaken && !held[i]->Alive()) {
      stacks[i].outcome = Outcome::kFailed;
      stacks[i].text = kernel[i];
      stacks[i].note = "the process ended while its stack was taken; its frames are dropped";
    }
  }
  return stacks;
}

namespace {

struct SampleWork {
  uv_work_t req{};
  std::optional<StackTools> tools;
  std::string exec_shim;
  Credentials who;
  std::vector<pid_t> pids;
  Millis budget{0};
  std::vector<SampledStack> stacks;
  std::function<void(std::vector<SampledStack>)> done;
  std::weak_ptr<int> sampler_alive;
};

}  // namespace

UvStackSampler::UvStackSampler(uv_loop_t* loop, std::string exec_shim,
                               std::optional<StackTools> tools)
    : loop_(loop), exec_shim_(std::move(exec_shim)), tools_(std::move(tools)) {}

void UvStackSampler::Sample(const std::vector<pid_t>& pids, const Credentials& who, Millis budget,
                            std::function<void(std::vector<SampledStack>)> done) {
  auto* work = new SampleWork;
  work->req.data = work;
  work->tools = tools_;
  work->exec_shim = exec_shim_;
  work->who = who;
  work->pids = pids;
  work->budget = budget;
  work->done = std::move(done);
  work->sampler_alive = alive_;
  const int rc = uv_queue_work(
      loop_, &work->req,
      [](uv_work_t* req) {
        auto* w = static_cast<SampleWork*>(req->data);
        if (!w->tools) w->tools = StackTools::Installed();
        w->stacks = TakeStacks(*w->tools, w->exec_shim, w->who, w->pids, w->budget);
      },
      [](uv_work_t* req, int) {
        auto* w = static_cast<SampleWork*>(req->data);
        if (!w->sampler_alive.expired()) w->done(std::move(w->stacks));
        delete w;
      });
  if (rc != 0) {
    spdlog::error("uv_queue_work (stacks): {}", uv_strerror(rc));
    std::vector<SampledStack> none(pids.size());
    for (SampledStack& s : none) s.note = Cat("could not queue the sampling: ", uv_strerror(rc));
    auto cb = std::move(work->done);
    delete work;
    cb(std::move(none));
  }
}

}  // namespace ltd
