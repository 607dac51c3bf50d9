// The guardian: a tiny process (lt-guardian) that ltd starts at start-up
// so that ltd's death, even by SIGKILL or the OOM killer, leaves nothing
// of its jobs running. PR_SET_PDEATHSIG reaches only ltd's direct
// children; the guardian covers everything else. It holds the read end of
// a pipe whose write end only ltd holds (close-on-exec, so no rank
// inherits it); EOF means ltd is gone, and the guardian kills what ltd
// told it to (its run cgroup, its marked processes) and exits.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fd.h"

namespace ltd {

class Guardian {
 public:
  // Spawns `binary` `args`... in its own session (a Ctrl-C meant for ltd
  // does not reach it) with only the pipe and stderr open.
  static absl::StatusOr<std::unique_ptr<Guardian>> Start(uv_loop_t* loop, std::string binary,
                                                         std::vector<std::string> args);
  // Tells the guardian ltd stops cleanly, closes the pipe and waits
  // (bounded) for it to finish its final sweep and exit, so it cannot race
  // an ltd started right after this one on the same state dir.
  ~Guardian();
  Guardian(const Guardian&) = delete;
  Guardian& operator=(const Guardian&) = delete;

  pid_t pid() const;

 private:
  struct Proc;
  Guardian(uv_loop_t* loop, std::string binary, std::vector<std::string> args);
  absl::Status Spawn();
  void OnExit(int64_t exit_status, int term_signal);

  uv_loop_t* loop_;
  std::string binary_;
  std::vector<std::string> args_;
  Proc* proc_ = nullptr;  // the running guardian's handle; freed by its close callback
  Fd write_end_;
  int restarts_ = 0;
};

}  // namespace ltd
