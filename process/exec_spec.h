// What lt-exec is to run, handed over on its fd 4 (see exec_shim.cc): a
// memfd holding CWD, ARGC, ARGV..., ENVC, ENV..., each NUL-terminated.
// Nothing of it goes through lt-exec's argv or environment, which the
// loader and lt-exec itself read while still root.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fd.h"

namespace ltd {

// The fd lt-exec reads what to run from.
constexpr int kExecSpecFd = 4;
// The rank's stack pipe (LT_STACK_FD): where a Python rank's faulthandler
// writes its frames when `ltctl stack` asks; only its supervisor reads
// the other end. lt-exec keeps it open across the exec.
constexpr int kStackFd = 5;

// InvalidArgument when a string holds a NUL byte: no rank could be given
// it whole (execve's strings end at the first).
absl::Status CheckExecSpec(const std::string& cwd, const std::vector<std::string>& argv,
                           const std::vector<std::string>& env);

// A memfd at offset 0 (close-on-exec: the spawn dups it onto fd 4), above
// the fds a spawn targets. InvalidArgument as CheckExecSpec.
absl::StatusOr<Fd> WriteExecSpec(const std::string& cwd, const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env);

}  // namespace ltd
