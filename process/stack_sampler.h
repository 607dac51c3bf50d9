// Where a hung rank is: its stack, taken before teardown. Python ranks
// (PYTHONFAULTHANDLER=1) print every thread's traceback to stderr on
// SIGABRT, which the job manager collects from the rank's output; native
// ranks are read with `gdb -p PID` in batch mode, run as the ranks' user
// through lt-exec, on libuv's thread pool.
#pragma once

#include <uv.h>

#include <memory>

#include "clock.h"
#include "process.h"

namespace ltd {

// True when the process runs a Python interpreter.
bool IsPythonProcess(pid_t pid);

class UvStackSampler final : public StackSampler {
 public:
  UvStackSampler(uv_loop_t* loop, std::string exec_shim);
  bool IsPython(pid_t pid) override { return IsPythonProcess(pid); }
  void Sample(const std::vector<pid_t>& pids, uid_t uid, gid_t gid, Millis budget,
              std::function<void(std::vector<std::string>)> done) override;

 private:
  uv_loop_t* loop_;
  std::string exec_shim_;
  std::string gdb_;  // empty when gdb is not installed
  // Work outlives the sampler at shutdown; its callback runs only while
  // this lives.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace ltd
