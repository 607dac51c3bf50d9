// One stack-taking tool (eu-stack, gdb) run for one rank, as the rank's
// user through lt-exec: the tool reads the rank's binary and libraries,
// which the user controls, and must never do so as root. It leads a
// process group of its own (in the supervisor's session, which the
// adopted-child sweep leaves alone), so one kill reaches all it started,
// and it is reaped through a pidfd with a deadline: a tracer the user put
// on the tool may hold its exit back from us, and the supervisor must not
// wait for it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fd.h"

namespace ltd {

class StackHelper {
 public:
  using Deadline = std::chrono::steady_clock::time_point;
  struct Setup {
    std::string exec_shim;  // lt-exec
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;  // LoginGroups(uid, gid)
  };
  static constexpr size_t kMaxOutput = 256 * 1024;

  // Starts `argv` (an absolute path first) with stdout and stderr on one
  // pipe, stdin /dev/null, an environment of PATH and LANG=C only.
  static absl::StatusOr<std::unique_ptr<StackHelper>> Start(const Setup& setup,
                                                            const std::vector<std::string>& argv);
  // Kills and reaps it (bounded) if that has not happened yet; one that a
  // Reap after Kill gave up on already is not waited for again.
  ~StackHelper();
  StackHelper(const StackHelper&) = delete;
  StackHelper& operator=(const StackHelper&) = delete;

  int out_fd() const { return out_.get(); }
  bool output_open() const { return out_.valid(); }
  // Reads what its pipe holds (it is ready); at EOF or an error closes it.
  void ReadSome();
  const std::string& output() const { return output_; }

  // SIGKILL to its whole process group, while its leader is ours to
  // signal (not reaped: a zombie keeps the pgid from being reused).
  void Kill();
  // Reaps it by `deadline`: true when it is reaped (its exit status in
  // `exit_code`, -1 when a signal ended it), false when it had not ended by
  // then; it is killed and left to the kernel then, and never waited for.
  bool Reap(Deadline deadline);
  int exit_code() const { return exit_code_; }

 private:
  StackHelper() = default;
  bool TryReap();

  pid_t pid_ = -1;
  Fd pidfd_;  // invalid on a kernel without pidfds: waitpid(WNOHANG) then
  Fd out_;
  std::string output_;
  bool reaped_ = false;
  bool killed_ = false;
  bool given_up_ = false;  // killed, and not reaped by the deadline
  int exit_code_ = -1;
};

}  // namespace ltd
