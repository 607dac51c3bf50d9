#include "stack_helper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "exec_shim_args.h"
#include "exec_spec.h"
#include "pidfd.h"
#include "posix_error.h"
#include "spawn_attr.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

// How long a killed helper gets to be reaped before it is left alone.
constexpr std::chrono::milliseconds kReapAfterKill{500};

}  // namespace

absl::StatusOr<std::unique_ptr<StackHelper>> StackHelper::Start(
    const Setup& setup, const std::vector<std::string>& argv) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return PosixError("pipe2", "a stack helper's output", errno);
  Fd rd(p[0]), wr(p[1]);
  // Low fds may be free in a supervisor (a rank's pipes closed): the
  // helper's stdout must not be a spawn target that an earlier dup2
  // overwrites.
  if (absl::Status s = AboveSpawnFds(wr); !s.ok()) return s;
  auto spec = WriteExecSpec("/", argv, {"PATH=/usr/bin:/bin", "LANG=C"});
  if (!spec.ok()) return spec.status();
  std::vector<std::string> shim_argv = {setup.exec_shim};
  AppendUserArgs(setup.uid, setup.gid, &setup.groups, shim_argv);
  std::vector<char*> cargv = CStrings(shim_argv);
  char* no_env[] = {nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), STDERR_FILENO);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), 3);  // where lt-exec says it failed
  posix_spawn_file_actions_adddup2(&fa, spec->get(), kExecSpecFd);
  // Spawned from a libuv pool thread, which blocks every signal: the tool
  // needs SIGCHLD and friends back.
  const CleanSpawnAttr attr(/*new_session=*/false, /*new_group=*/true);
  pid_t child = -1;
  const int rc = posix_spawn(&child, cargv[0], &fa, attr.get(), cargv.data(), no_env);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return PosixError("posix_spawn", Cat(setup.exec_shim, " for ", argv.front()), rc);
  std::unique_ptr<StackHelper> h(new StackHelper);
  h->pid_ = child;
  // Nobody else reaps a child of our session, so the pid is still this
  // child's, exited or not.
  h->pidfd_ = Fd(PidfdOpen(child));
  h->out_ = std::move(rd);
  return h;
}

StackHelper::~StackHelper() {
  if (reaped_ || given_up_ || pid_ <= 0) return;
  Kill();
  Reap(std::chrono::steady_clock::now() + kReapAfterKill);
}

void StackHelper::ReadSome() {
  char buf[8192];
  const ssize_t n = read(out_.get(), buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    out_.reset();
    return;
  }
  if (output_.size() < kMaxOutput) output_.append(buf, static_cast<size_t>(n));
}

void StackHelper::Kill() {
  if (reaped_ || pid_ <= 0) return;
  killed_ = true;
  // The leader is unreaped, so its pid and pgid name it and its group.
  if (kill(-pid_, SIGKILL) != 0 && errno != ESRCH) {
    spdlog::debug("kill(-{}, SIGKILL): {}", pid_, std::strerror(errno));
  }
  if (pidfd_.valid()) PidfdSendSignal(pidfd_.get(), SIGKILL);
}

bool StackHelper::TryReap() {
  siginfo_t info{};
  int rc;
  if (pidfd_.valid()) {
    rc = waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info,
                WEXITED | WNOHANG);
  } else {
    rc = waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG);
  }
  if (rc != 0) {
    if (errno == EINTR) return false;
    reaped_ = true;  // ECHILD: not ours to wait for any more
    return true;
  }
  if (info.si_pid == 0) return false;
  reaped_ = true;
  exit_code_ = info.si_code == CLD_EXITED ? info.si_status : -1;
  return true;
}

bool StackHelper::Reap(Deadline deadline) {
  if (reaped_) return true;
  for (;;) {
    if (TryReap()) return true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      if (killed_) {
        given_up_ = true;
        spdlog::warn("stack helper pid={} did not end after SIGKILL (traced?); left to the kernel",
                     pid_);
      }
      return false;
    }
    // A pidfd turns readable when the process exits; a traced one may
    // still not be waitable then, so look again at least every 20ms.
    const int wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 20));
    if (pidfd_.valid()) {
      pollfd pfd{pidfd_.get(), POLLIN, 0};
      poll(&pfd, 1, wait_ms);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    }
  }
}

}  // namespace ltd
