#include "first_contact.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>

#include <cerrno>
#include <thread>

#include "posix_error.h"
#include "str_util.h"

namespace ltd {

bool PeerGone(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  int n;
  while ((n = poll(&p, 1, 0)) < 0 && errno == EINTR) {
  }
  return n > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

absl::StatusOr<std::optional<Fd>> LockJob(const std::string& lock_path, int ltd_fd,
                                          std::chrono::milliseconds deadline) {
  Fd lock(open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600));
  if (!lock.valid()) return PosixError("open", lock_path, errno);
  const auto give_up = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    if (flock(lock.get(), LOCK_EX | LOCK_NB) == 0) return std::optional<Fd>(std::move(lock));
    if (errno != EWOULDBLOCK && errno != EINTR) return PosixError("flock", lock_path, errno);
    // The holder is a supervisor whose ltd went before it watched it; it
    // goes as soon as it notices, in milliseconds. Ours may go too.
    if (ltd_fd >= 0 && PeerGone(ltd_fd)) return std::optional<Fd>();
    if (std::chrono::steady_clock::now() >= give_up) {
      return absl::UnavailableError(Cat("flock(", lock_path,
                                        "): another supervisor of the job still holds it after ",
                                        deadline.count(), " ms"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

absl::StatusOr<std::unique_ptr<FirstContact>> FirstContact::Watch(uv_loop_t* loop, int ltd_fd,
                                                                  std::function<void()> gone) {
  std::unique_ptr<FirstContact> c(new FirstContact());
  c->fd_.reset(fcntl(ltd_fd, F_DUPFD_CLOEXEC, 0));
  if (!c->fd_.valid()) return PosixError("fcntl(F_DUPFD_CLOEXEC)", "ltd's connection", errno);
  c->gone_ = std::move(gone);
  int rc = 0;
  c->poll_ =
      UvInit<uv_poll_t>([&](uv_poll_t* p) { return rc = uv_poll_init(loop, p, c->fd_.get()); });
  if (!c->poll_) return PosixError("uv_poll_init", "ltd's connection", -rc);
  c->poll_->data = c.get();
  // Only the hang-up: the bytes are the server's to read.
  rc = uv_poll_start(c->poll_.get(), UV_DISCONNECT, [](uv_poll_t* p, int, int) {
    auto* self = static_cast<FirstContact*>(p->data);
    if (!PeerGone(self->fd_.get())) return;
    self->poll_.reset();
    auto gone = std::move(self->gone_);
    if (gone) gone();
  });
  if (rc != 0) return PosixError("uv_poll_start", "ltd's connection", -rc);
  return c;
}

void FirstContact::Watched() {
  poll_.reset();
  fd_.reset();
  gone_ = nullptr;
}

}  // namespace ltd
