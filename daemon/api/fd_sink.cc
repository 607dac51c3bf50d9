#include "fd_sink.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <pwd.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

#include "pidfd.h"
#include "posix_error.h"
#include "spdlog/spdlog.h"

extern char** environ;

namespace ltd {
namespace {

// The kernel's SCM_MAX_FD: the most descriptors one message carries.
constexpr size_t kFdsAMessage = 253;
// Batches unread this long: the sink is stuck, or lost a token.
constexpr auto kBehindAfter = std::chrono::seconds(1);

[[noreturn]] void Exit(int code) {
  syscall(SYS_exit_group, code);
  __builtin_unreachable();
}

// The sink, in a copy of ltd made by clone3 (no exec): only system calls
// and plain loops, as a copy of a threaded process may make.
[[noreturn]] void SinkMain(int vault, int tokens, pid_t parent, uid_t uid, gid_t gid) {
  // None of ltd's descriptors but these two, none of its environment.
  const int low = std::min(vault, tokens);
  const int high = std::max(vault, tokens);
  if (low > 0) syscall(SYS_close_range, 0U, static_cast<unsigned>(low - 1), 0U);
  if (high > low + 1) {
    syscall(SYS_close_range, static_cast<unsigned>(low + 1), static_cast<unsigned>(high - 1), 0U);
  }
  syscall(SYS_close_range, static_cast<unsigned>(high + 1), ~0U, 0U);
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    for (char* c = *e; *c != '\0'; ++c) *c = '\0';
  }
  if (syscall(SYS_setgroups, 0, nullptr) != 0 || syscall(SYS_setresgid, gid, gid, gid) != 0 ||
      syscall(SYS_setresuid, uid, uid, uid) != 0) {
    Exit(1);
  }
  // After the change of user, which clears the first and may leave the
  // second set (fs.suid_dumpable): the sink holds a copy of ltd's memory.
  syscall(SYS_prctl, PR_SET_DUMPABLE, 0UL, 0UL, 0UL, 0UL);
  syscall(SYS_prctl, PR_SET_PDEATHSIG, static_cast<unsigned long>(SIGKILL), 0UL, 0UL, 0UL);
  if (syscall(SYS_getppid) != parent) Exit(0);
  syscall(SYS_prctl, PR_SET_NAME, "ltd-fd-sink", 0UL, 0UL, 0UL);
  for (;;) {
    char token = 0;
    long n = syscall(SYS_read, tokens, &token, 1UL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) Exit(n == 0 ? 0 : 1);
    // One batch (a byte each), with no room for its descriptors: the read
    // drops them, and ltd holds no copy now, so the last close is here.
    char byte = 0;
    do {
      n = syscall(SYS_recvfrom, vault, &byte, 1UL, 0, nullptr, nullptr);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) Exit(n == 0 ? 0 : 1);
  }
}

int Pending(int fd) {
  int n = 0;
  return ioctl(fd, FIONREAD, &n) == 0 ? n : 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FdSink>> FdSink::Create(int epoll_fd, uint64_t tag) {
  auto sink = std::unique_ptr<FdSink>(new FdSink(epoll_fd, tag));
  passwd pw{};
  passwd* found = nullptr;
  char buf[1024];
  if (getpwnam_r("nobody", &pw, buf, sizeof buf, &found) == 0 && found != nullptr) {
    sink->uid_ = found->pw_uid;
    sink->gid_ = found->pw_gid;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return PosixError("socketpair", "the descriptor sink's vault", errno);
  }
  sink->vault_in_.reset(sv[0]);
  sink->vault_out_.reset(sv[1]);
  (void)fcntl(sink->vault_in_.get(), F_SETFL, O_NONBLOCK);
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return PosixError("pipe2", "the descriptor sink's tokens", errno);
  sink->tokens_out_.reset(p[0]);
  sink->tokens_in_.reset(p[1]);
  (void)fcntl(sink->tokens_in_.get(), F_SETFL, O_NONBLOCK);
  return sink;
}

FdSink::~FdSink() {
  for (auto& [pid, sink] : sinks_) (void)PidfdSendSignal(sink.pidfd.get(), SIGKILL);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (auto& [pid, sink] : sinks_) {
    while (waitpid(pid, nullptr, WNOHANG) == 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  // Closing a vault with batches in it, or what waits, could be a last
  // close here: left to this process's exit, which does not linger.
  if (Pending(vault_out_.get()) > 0) {
    (void)vault_in_.release();
    (void)vault_out_.release();
  }
  for (Fd& fd : held_) (void)fd.release();
}

void FdSink::Drop(std::vector<Fd> fds) {
  for (Fd& fd : fds) {
    if (fd.valid()) held_.push_back(std::move(fd));
  }
  Flush();
}

void FdSink::Check(std::chrono::steady_clock::time_point now) {
  const int unread = Pending(vault_out_.get());
  if (unread == 0) {
    behind_since_.reset();
    return;
  }
  // Batches are a byte each: what the sinks have read since the last look.
  const uint64_t read = sent_ - static_cast<uint64_t>(unread);
  if (!behind_since_ || read != read_at_look_) {
    behind_since_ = now;
    read_at_look_ = read;
    return;
  }
  if (now - *behind_since_ < kBehindAfter) return;
  // Nothing read for a second, batches waiting: no sink is between a
  // token and its batch (that takes no time), so tokens short of the
  // batches were taken by a sink that died there.
  behind_since_ = now;
  const int tokens = Pending(tokens_out_.get());
  if (tokens < unread) {
    spdlog::info("giving the descriptor sinks back {} token(s) a killed sink took",
                 unread - tokens);
    const std::string again(static_cast<size_t>(unread - tokens), 't');
    (void)!write(tokens_in_.get(), again.data(), again.size());
    return;
  }
  if (active_ != nullptr) {
    spdlog::warn(
        "descriptor sink pid {} has read nothing for a second (stuck in a close a client "
        "made); killing it and starting another",
        active_->pid);
    Retire();
  }
}

void FdSink::Flush() {
  Check(std::chrono::steady_clock::now());
  if (active_ == nullptr && !Start()) return;
  while (!held_.empty()) {
    const size_t n = std::min(held_.size(), kFdsAMessage);
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFdsAMessage)] = {};
    char byte = 'b';
    iovec iov{&byte, 1};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * n);
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * n);
    for (size_t i = 0; i < n; ++i) {
      const int fd = held_[i].get();
      std::memcpy(CMSG_DATA(c) + i * sizeof(int), &fd, sizeof fd);
    }
    if (sendmsg(vault_in_.get(), &m, MSG_DONTWAIT | MSG_NOSIGNAL) != 1) {
      if (errno == EINTR) continue;
      return;  // full (the sink behind) or short of memory: later
    }
    // In the vault, which no one else holds: these closes are not last.
    held_.erase(held_.begin(), held_.begin() + static_cast<ptrdiff_t>(n));
    (void)!write(tokens_in_.get(), "t", 1);
    ++sent_;
    if (!behind_since_) {
      behind_since_ = std::chrono::steady_clock::now();
      read_at_look_ = sent_ - static_cast<uint64_t>(Pending(vault_out_.get()));
    }
  }
}

bool FdSink::Start() {
  if (sinks_.size() >= kMaxSinks) return false;
  int pidfd = -1;
  clone_args args{};
  args.flags = CLONE_PIDFD;
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  const pid_t parent = getpid();
  // Blocked in the sink for good: no handler of ltd's runs in its copy.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) SinkMain(vault_out_.get(), tokens_out_.get(), parent, uid_, gid_);
  const int err = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    if (!told_start_failed_) {
      spdlog::warn("could not start a descriptor sink: clone3: {}", std::strerror(err));
      told_start_failed_ = true;
    }
    return false;
  }
  told_start_failed_ = false;
  Sink sink;
  sink.pid = static_cast<pid_t>(pid);
  sink.pidfd.reset(pidfd);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = (static_cast<uint64_t>(pid) << 2) | tag_;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, pidfd, &ev) != 0) {
    spdlog::warn("epoll_ctl for descriptor sink pid {}: {}", pid, std::strerror(errno));
  }
  auto [it, fresh] = sinks_.emplace(sink.pid, std::move(sink));
  active_ = &it->second;
  spdlog::debug("started descriptor sink pid {}", pid);
  return true;
}

void FdSink::Retire() {
  if (active_ == nullptr) return;
  (void)PidfdSendSignal(active_->pidfd.get(), SIGKILL);
  active_ = nullptr;
}

void FdSink::OnExit(pid_t pid) {
  auto it = sinks_.find(pid);
  if (it == sinks_.end()) return;
  siginfo_t info{};
  if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(it->second.pidfd.get()), &info,
             WEXITED | WNOHANG) != 0 ||
      info.si_pid == 0) {
    return;  // not yet
  }
  (void)epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.pidfd.get(), nullptr);
  if (active_ == &it->second) {
    spdlog::warn("descriptor sink pid {} ended ({}); starting another", pid,
                 info.si_code == CLD_EXITED ? "exit " + std::to_string(info.si_status)
                                            : "signal " + std::to_string(info.si_status));
    active_ = nullptr;
  }
  sinks_.erase(it);
  Flush();
}

}  // namespace ltd
