#include "line_writer.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace ltworker::internal {
namespace {

// Kernels before pipes learned RWF_NOWAIT reject it with EOPNOTSUPP (or
// ENOSYS, before pwritev2). We then
// fall back to poll() + write() for the rest of the process's life: a free
// pipe slot takes a whole line (<= PIPE_BUF), so that write does not block
// unless another writer fills the pipe between the two calls.
std::atomic<bool> g_pipe_nowait_unsupported{false};

ssize_t SendSocket(int fd, std::string_view line) {
  ssize_t n;
  do {
    n = ::send(fd, line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

ssize_t WritePipeOnce(int fd, std::string_view line) {
  if (!g_pipe_nowait_unsupported.load(std::memory_order_relaxed)) {
    iovec iov{const_cast<char*>(line.data()), line.size()};
    ssize_t n;
    do {
      n = ::pwritev2(fd, &iov, 1, -1, RWF_NOWAIT);
    } while (n < 0 && errno == EINTR);
    if (n >= 0 || (errno != EOPNOTSUPP && errno != ENOSYS)) return n;
    g_pipe_nowait_unsupported.store(true, std::memory_order_relaxed);
  }
  pollfd pfd{fd, POLLOUT, 0};
  int ready;
  do {
    ready = ::poll(&pfd, 1, 0);
  } while (ready < 0 && errno == EINTR);
  if (ready < 0) return -1;
  if (ready == 0) {
    errno = EAGAIN;
    return -1;
  }
  if ((pfd.revents & POLLERR) != 0 && (pfd.revents & POLLOUT) == 0) {
    errno = EPIPE;  // no reader left; skip the write and its SIGPIPE
    return -1;
  }
  ssize_t n;
  do {
    n = ::write(fd, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  return n;
}

// A write to a pipe whose reader is gone raises SIGPIPE, whose default action
// kills the rank. Blocking it for this thread around the write turns that into
// a plain EPIPE; the signal then stays pending on this thread and is consumed
// before unblocking, so the program never sees it.
ssize_t WritePipe(int fd, std::string_view line) {
  sigset_t pipe_only;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigset_t old;
  const int mask_rc = ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  if (mask_rc != 0) {
    errno = mask_rc;
    return -1;
  }
  // If the caller had SIGPIPE blocked already, a pending SIGPIPE may be the
  // caller's own; leave the mask and any pending signal as they were.
  const bool we_blocked = sigismember(&old, SIGPIPE) == 0;

  ssize_t n = WritePipeOnce(fd, line);
  const int saved_errno = errno;
  if (we_blocked) {
    if (n < 0 && saved_errno == EPIPE) {
      const timespec zero{0, 0};
      int sig;
      do {
        sig = ::sigtimedwait(&pipe_only, nullptr, &zero);
      } while (sig < 0 && errno == EINTR);
      // sig < 0 with EAGAIN: SIGPIPE is ignored, so none was generated.
    }
    // Restoring a mask we just read cannot fail; nothing to handle.
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  errno = saved_errno;
  return n;
}

ssize_t WritePlain(int fd, std::string_view line) {
  ssize_t n;
  do {
    n = ::write(fd, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  return n;
}

}  // namespace

bool ClassifyFd(int fd, FdKind* kind) {
  if (fd < 0) {
    errno = EBADF;
    return false;
  }
  if (::fcntl(fd, F_GETFD) < 0) return false;
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return false;
  if ((flags & O_ACCMODE) == O_RDONLY) {
    errno = EBADF;
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) < 0) return false;
  if (S_ISSOCK(st.st_mode)) {
    *kind = FdKind::kSocket;
  } else if (S_ISFIFO(st.st_mode)) {
    *kind = FdKind::kPipe;
  } else {
    *kind = FdKind::kOther;
  }
  return true;
}

int WriteLine(int fd, FdKind kind, std::string_view line) {
  ssize_t n;
  switch (kind) {
    case FdKind::kSocket:
      n = SendSocket(fd, line);
      break;
    case FdKind::kPipe:
      n = WritePipe(fd, line);
      break;
    default:
      n = WritePlain(fd, line);
      break;
  }
  if (n < 0) {
    if (errno == EWOULDBLOCK) errno = EAGAIN;
    return -1;
  }
  if (static_cast<std::size_t>(n) != line.size()) {
    errno = EAGAIN;
    return -1;
  }
  return 0;
}

}  // namespace ltworker::internal
