#include "state_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "str_util.h"

namespace ltd {
namespace {

// How long another's hold on the lock must last before ltd refuses.
constexpr std::chrono::milliseconds kHeldWait{1000};

}  // namespace

absl::StatusOr<StateLock> StateLock::Acquire(const std::string& state_dir) {
  const std::string path = state_dir + "/ltd.lock";
  Fd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) {
    return absl::UnavailableError(Cat("open(", path, "): ", std::strerror(errno)));
  }
  // A killed ltd's lock outlives it while a child it was starting has not
  // yet reached its exec (which closes its copy of the fd): a restart
  // right after a SIGKILL waits that out. A live ltd holds it for longer.
  const auto give_up = std::chrono::steady_clock::now() + kHeldWait;
  while (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) {
      return absl::UnavailableError(Cat("flock(", path, "): ", std::strerror(errno)));
    }
    if (std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    char pid[32] = {};
    const ssize_t n = pread(fd.get(), pid, sizeof pid - 1, 0);
    std::string holder = n > 0 ? std::string(pid, static_cast<size_t>(n)) : "";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    return absl::AlreadyExistsError(
        Cat("another ltd", holder.empty() ? "" : Cat(" (pid ", holder, ")"), " is using state dir ",
            state_dir, "; stop it first or give this one another --state-dir"));
  }
  const std::string mine = Cat(getpid(), "\n");
  if (ftruncate(fd.get(), 0) != 0 ||
      pwrite(fd.get(), mine.data(), mine.size(), 0) != static_cast<ssize_t>(mine.size())) {
    return absl::UnavailableError(Cat("write(", path, "): ", std::strerror(errno)));
  }
  return StateLock(std::move(fd));
}

}  // namespace ltd
