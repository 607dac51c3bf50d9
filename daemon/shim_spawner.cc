#include "shim_spawner.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "pidfd.h"
#include "posix_error.h"
#include "spare_wire.h"
#include "spawn_attr.h"
#include "str_util.h"

namespace ltd {

std::string ExitText(const siginfo_t& info) {
  if (info.si_code == CLD_EXITED) return Cat("exited with code ", info.si_status);
  const char* name = sigabbrev_np(info.si_status);
  return Cat("died of signal ", info.si_status, name != nullptr ? Cat(" (SIG", name, ")") : "");
}

absl::StatusOr<std::pair<Fd, Fd>> ShimConnection() {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0) {
    return PosixError("socketpair", "a supervisor's connection", errno);
  }
  return std::make_pair(Fd(pair[0]), Fd(pair[1]));
}

absl::StatusOr<SpawnedShim> SpawnShim(const ShimConfig& config, const std::string& state_dir,
                                      const std::string& job_id, Fd* assign, bool etcd_build) {
  // A job's supervisor has its connection now; a spare's comes with each
  // job, down its socket (spare_wire.h), which is close-on-exec here, so
  // that only ltd holds this end, and the spare reads EOF (and exits)
  // once ltd is gone.
  Fd ours, theirs, spare_end;
  if (assign == nullptr) {
    auto pair = ShimConnection();
    if (!pair.ok()) return pair.status();
    ours = std::move(pair->first);
    theirs = std::move(pair->second);
  } else {
    int p[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p) != 0) {
      return PosixError("socketpair", "a spare supervisor's socket", errno);
    }
    spare_end.reset(p[0]);
    assign->reset(p[1]);
  }
  for (Fd* fd : {&theirs, &spare_end}) {
    if (fd->valid()) {
      if (absl::Status s = AboveSpawnFds(*fd); !s.ok()) return s;
    }
  }
  // A spare's --job holds room for the id it is given, which it writes
  // over this, so that ps shows whose supervisor it has become.
  const std::string job_arg = assign != nullptr ? std::string(kMaxJobIdDigits, '_') : job_id;
  const std::string& binary = etcd_build ? config.shim_etcd_binary : config.shim_binary;
  std::vector<std::string> args = {binary,
                                   "--state-dir",
                                   state_dir,
                                   "--job",
                                   job_arg,
                                   "--exec",
                                   config.exec_binary,
                                   "--containment",
                                   config.containment,
                                   "--restore-window-ms",
                                   std::to_string(config.restore_window.count()),
                                   "--stack-budget-ms",
                                   std::to_string(config.stack_budget.count()),
                                   "--restart-backoff-ms",
                                   std::to_string(config.restart_backoff.count()),
                                   "--job-max-log-bytes",
                                   std::to_string(config.job_max_log_bytes),
                                   "--log-level",
                                   config.log_level,
                                   "--auto-heartbeat-dir",
                                   config.auto_heartbeat_dir,
                                   "--auto-heartbeat-timeout-ms",
                                   std::to_string(config.auto_heartbeat_timeout.count()),
                                   "--ltd-fd"};
  if (assign != nullptr) args.push_back("--spare");
  if (!config.device_program_proven.empty()) {
    args.push_back("--device-program-proven");
    args.push_back(config.device_program_proven);
  }
  std::vector<char*> argv = CStrings(args);
  char* envp[] = {const_cast<char*>("PATH=/usr/sbin:/usr/bin:/sbin:/bin"), nullptr};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  // dup2 clears close-on-exec.
  if (theirs.valid()) posix_spawn_file_actions_adddup2(&actions, theirs.get(), 3);
  if (spare_end.valid()) posix_spawn_file_actions_adddup2(&actions, spare_end.get(), 4);
  // Its own session: a Ctrl-C or a hangup meant for ltd never reaches it.
  const CleanSpawnAttr attr(/*new_session=*/true);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, binary.c_str(), &actions, attr.get(), argv.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return PosixError("posix_spawn", binary, rc);
  // Not reaped until ltd says so: the pid cannot be anyone else's yet.
  Fd pidfd(PidfdOpen(pid));
  if (!pidfd.valid()) {
    const int err = errno;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return PosixError("pidfd_open", "a supervisor", err);
  }
  return SpawnedShim{pid, std::move(pidfd), std::move(ours)};
}

}  // namespace ltd
