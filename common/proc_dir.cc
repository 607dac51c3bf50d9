#include "proc_dir.h"

#include <fcntl.h>

#include <cerrno>

#include "pidfd.h"
#include "posix_error.h"

namespace ltd {

std::optional<ProcDir> ProcDir::Open(pid_t pid, int pidfd) {
  if (pid <= 0) return std::nullopt;
  Fd own;
  if (pidfd < 0) {
    own.reset(PidfdOpen(pid));
    if (!own.valid()) return std::nullopt;
    pidfd = own.get();
  }
  Fd dir(open(("/proc/" + std::to_string(pid)).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) return std::nullopt;
  // Still there after the open: the pid was never free in between, so the
  // directory is the pidfd's process.
  if (PidfdSendSignal(pidfd, 0) != 0 && errno != EPERM) return std::nullopt;
  return ProcDir(pid, std::move(dir), std::move(own), pidfd);
}

std::string ProcDir::path() const { return "/proc/self/fd/" + std::to_string(dir_.get()); }

bool ProcDir::Alive() const { return PidfdSendSignal(pidfd_, 0) == 0 || errno == EPERM; }

absl::StatusOr<std::string> ProcDir::Read(const char* name, size_t max) const {
  Fd fd(openat(dir_.get(), name, O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) return PosixError("open", "/proc/" + std::to_string(pid_) + "/" + name, errno);
  std::string out;
  char buf[4096];
  while (out.size() < max) {
    const ssize_t got = read(fd.get(), buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return PosixError("read", "/proc/" + std::to_string(pid_) + "/" + name, errno);
    if (got == 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  if (out.size() > max) out.resize(max);
  return out;
}

}  // namespace ltd
