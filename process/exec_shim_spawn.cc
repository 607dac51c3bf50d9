#include "exec_shim_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "exec_shim_args.h"
#include "exec_spec.h"
#include "fd.h"
#include "pidfd.h"
#include "posix_error.h"
#include "spawn_attr.h"
#include "str_util.h"

namespace ltd {

void KillAndReap(pid_t pid) {
  kill(pid, SIGKILL);
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

absl::StatusOr<ClonedRank> SpawnExecShim(const std::string& exec_shim, const RankFds& fds,
                                         std::unique_ptr<RankStartPlan> plan) {
  std::vector<std::string> argv = {exec_shim};
  for (const std::string& cgroup : plan->cgroups()) {
    argv.push_back("--cgroup");
    argv.push_back(cgroup);
  }
  if (const auto& user = plan->user()) {
    AppendUserArgs(user->uid, user->gid, user->later ? nullptr : &user->groups, argv);
  }
  for (const RankLimit& l : plan->limits()) {
    argv.push_back("--rlimit");
    argv.push_back(Cat(l.resource, ":", l.limit.rlim_cur, ":", l.limit.rlim_max));
  }
  argv.push_back("--parent");
  argv.push_back(std::to_string(plan->start().parent));
  std::vector<char*> args = CStrings(argv);
  char* no_env[] = {nullptr};
  const RankStartPlan::What& what = plan->what();
  auto spec = WriteExecSpec(what.cwd, what.argv, what.env);
  if (!spec.ok()) return spec.status();

  // posix_spawn, not fork: the parent is suspended only until lt-exec's
  // execve (the child shares its memory, as with vfork), instead of
  // copying this process's page tables for every rank, which cost ~10 ms
  // a rank on a VM. Nothing but these dup2s runs in the child before
  // lt-exec; every other fd of ours is close-on-exec.
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds.stdout_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, fds.stderr_fd, STDERR_FILENO);
  posix_spawn_file_actions_adddup2(&fa, fds.heartbeat, kRankHeartbeatFd);
  static_assert(kExecSpecFd == 4 && kStackFd == kRankStackFd && kGroupsFd == kRankGroupsFd);
  posix_spawn_file_actions_adddup2(&fa, spec->get(), kExecSpecFd);  // lt-exec reads and closes it
  posix_spawn_file_actions_adddup2(&fa, fds.stack, kStackFd);
  if (fds.groups >= 0) posix_spawn_file_actions_adddup2(&fa, fds.groups, kGroupsFd);
  const CleanSpawnAttr attr(/*new_session=*/true);  // each rank its own process group
  ClonedRank started;
  const int rc = posix_spawn(&started.pid, args[0], &fa, attr.get(), args.data(), no_env);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return PosixError("posix_spawn", exec_shim, rc);
  // Only this thread reaps our children, so the pid is still this child's.
  started.pidfd.reset(PidfdOpen(started.pid));
  if (!started.pidfd.valid()) {
    const int err = errno;
    KillAndReap(started.pid);
    return absl::UnavailableError(Cat("pidfd_open(", started.pid, "): ", std::strerror(err),
                                      err == ENOSYS ? "; ltd needs Linux 5.3 or newer" : ""));
  }
  return started;
}

}  // namespace ltd
