// An admin's program that ltd runs when something needs a person (ltd's
// --unkillable-program, as Slurm's UnkillableStepProgram): as root, which
// configured it, with what happened in its environment, stdin /dev/null,
// its output in ltd's log. It leads a process group of its own, killed at
// the deadline; nothing ever waits for it on the loop (libuv reaps it).
#pragma once

#include <uv.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "uv_handle.h"

namespace ltd {

class AdminProgram {
 public:
  // `path`: absolute; empty: Run does nothing.
  AdminProgram(uv_loop_t* loop, std::string path, std::chrono::milliseconds deadline);
  ~AdminProgram();  // kills whatever of it still runs
  AdminProgram(const AdminProgram&) = delete;
  AdminProgram& operator=(const AdminProgram&) = delete;

  // Starts it once more with `env` (K=V) added to PATH; `what` names the
  // run in ltd's log. A start that fails is logged.
  void Run(const std::vector<std::string>& env, const std::string& what);
  size_t running() const { return runs_.size(); }

 private:
  struct Instance;
  void Exited(Instance* run, int64_t status, int signal);

  uv_loop_t* loop_;
  std::string path_;
  std::chrono::milliseconds deadline_;
  std::map<Instance*, std::unique_ptr<Instance>> runs_;
};

}  // namespace ltd
