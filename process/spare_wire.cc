#include "spare_wire.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "posix_error.h"

namespace ltd {
namespace {

constexpr char kFree[] = "free\n";

}  // namespace

absl::Status SendJob(int spare, const std::string& id, int connection) {
  const std::string line = id + "\n";
  iovec iov{const_cast<char*>(line.data()), line.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &connection, sizeof(int));
  ssize_t n;
  do {
    n = sendmsg(spare, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return PosixError("sendmsg", "a spare supervisor's socket", errno);
  if (static_cast<size_t>(n) != line.size()) {
    return absl::UnavailableError("a spare supervisor's socket took part of its job's id");
  }
  return absl::OkStatus();
}

std::optional<AssignedJob> ReceiveJob(int spare) {
  char buf[kMaxJobIdDigits + 2];
  iovec iov{buf, sizeof buf};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = recvmsg(spare, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return std::nullopt;
  // Every fd that came is closed but the one connection taken.
  std::optional<AssignedJob> job;
  int fds = 0;
  if ((msg.msg_flags & MSG_CTRUNC) == 0) job.emplace();
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (job && fds++ == 0) {
        job->connection.reset(fd);
      } else {
        close(fd);
      }
    }
  }
  const std::string_view line(buf, static_cast<size_t>(n));
  const bool well_formed = (msg.msg_flags & MSG_TRUNC) == 0 && line.size() >= 2 &&
                           line.size() <= kMaxJobIdDigits + 1 && line.back() == '\n' &&
                           line.find_first_not_of("0123456789") == line.size() - 1;
  if (!job || fds != 1 || !well_formed) return std::nullopt;
  job->id.assign(line.substr(0, line.size() - 1));
  return job;
}

bool SendFree(int spare) {
  ssize_t n;
  do {
    n = send(spare, kFree, sizeof kFree - 1, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof kFree - 1);
}

SpareWord ReadSpareWord(int spare) {
  char buf[sizeof kFree];
  ssize_t n;
  do {
    n = recv(spare, buf, sizeof buf, MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return SpareWord::kNothingYet;
  const bool free =
      n == static_cast<ssize_t>(sizeof kFree - 1) && std::memcmp(buf, kFree, sizeof kFree - 1) == 0;
  return free ? SpareWord::kFree : SpareWord::kGone;
}

}  // namespace ltd
