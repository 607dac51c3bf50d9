// pidfds (Linux 5.3+): a handle on one process that, unlike its pid, can
// never come to name another process. Raw syscalls: glibc 2.36's
// <sys/pidfd.h> declares them without C linkage, so C++ cannot call them.
#pragma once

#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

namespace ltd {

// A CLOEXEC pidfd for `pid`, or -1 with errno.
inline int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0U)); }

// 0, or -1 with errno (ESRCH once the process is reaped).
inline int PidfdSendSignal(int pidfd, int sig) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0U));
}

}  // namespace ltd
