// Where a hung rank is: its stack, taken before teardown. Python ranks
// (PYTHONFAULTHANDLER=1) print every thread's traceback to stderr on
// SIGABRT, which the job's supervisor collects from the rank's output; native
// ranks are read with elfutils' `eu-stack -p PID` (a fraction of gdb's
// cost: it reads no DWARF), gdb in batch mode where eu-stack is missing
// or gave nothing, every rank at once, each tool run as the ranks' user
// through lt-exec (StackHelper), on libuv's thread pool. The kernel's view
// of each thread (/proc/PID/task/*/wchan and stack) comes with every rank,
// taken or not.
#pragma once

#include <uv.h>

#include <memory>
#include <optional>

#include "clock.h"
#include "process.h"

namespace ltd {

// True when the process runs a Python interpreter.
bool IsPythonProcess(pid_t pid);

// The tools a sampler may use, by path (empty: not installed).
struct StackTools {
  std::string eu_stack;
  std::string gdb;
  static StackTools Installed();
};

class UvStackSampler final : public StackSampler {
 public:
  // Without `tools`, they are looked up at each sample, on the pool: a
  // sample is rare, a supervisor's job is not (and a tool installed since
  // the supervisor started is found).
  UvStackSampler(uv_loop_t* loop, std::string exec_shim,
                 std::optional<StackTools> tools = std::nullopt);
  bool IsPython(pid_t pid) override { return IsPythonProcess(pid); }
  void Sample(const std::vector<pid_t>& pids, const Credentials& who, Millis budget,
              std::function<void(std::vector<SampledStack>)> done) override;

 private:
  uv_loop_t* loop_;
  std::string exec_shim_;
  std::optional<StackTools> tools_;
  // Work outlives the sampler at shutdown; its callback runs only while
  // this lives.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

// Takes the stacks of `pids` right here (blocking, within `budget`): what
// UvStackSampler runs on the pool. For tests and benchmarks too.
std::vector<SampledStack> TakeStacks(const StackTools& tools, const std::string& exec_shim,
                                     const Credentials& who, const std::vector<pid_t>& pids,
                                     Millis budget);

}  // namespace ltd
