#include "helper_spawn.h"

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <cerrno>

#include "exec_spec.h"
#include "pidfd.h"
#include "posix_error.h"
#include "spawn_attr.h"
#include "str_util.h"

namespace ltd {

absl::StatusOr<SpawnedHelper> SpawnHelper(const std::vector<std::string>& argv,
                                          const std::vector<int>& fds) {
  // posix_spawn dups in order: a source that is also a later target would
  // be overwritten first, so each source is moved above every target.
  const int targets = static_cast<int>(fds.size());
  std::vector<Fd> moved;
  std::vector<int> sources;
  for (int fd : fds) {
    if (fd < 0 || fd >= targets) {
      sources.push_back(fd);
      continue;
    }
    Fd copy(fcntl(fd, F_DUPFD_CLOEXEC, targets));
    if (!copy.valid()) return PosixError("fcntl(F_DUPFD_CLOEXEC)", argv.front(), errno);
    sources.push_back(copy.get());
    moved.push_back(std::move(copy));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  for (int i = 0; i < targets; ++i) {
    if (sources[static_cast<size_t>(i)] < 0) {
      posix_spawn_file_actions_addopen(&fa, i, "/dev/null", O_RDWR, 0);
    } else {
      posix_spawn_file_actions_adddup2(&fa, sources[static_cast<size_t>(i)], i);
    }
  }
  // Nothing else crosses, close-on-exec or not.
  posix_spawn_file_actions_addclosefrom_np(&fa, targets);
  posix_spawn_file_actions_addchdir_np(&fa, "/");
  const CleanSpawnAttr attr(/*new_session=*/false, /*new_group=*/true);
  std::vector<char*> cargv = CStrings(argv);
  char* no_env[] = {nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, cargv[0], &fa, attr.get(), cargv.data(), no_env);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return PosixError("posix_spawn", argv.front(), rc);
  SpawnedHelper h;
  h.pid = pid;
  // Nobody else reaps a child of our session: the pid is still this one's.
  h.pidfd = Fd(PidfdOpen(pid));
  return h;
}

}  // namespace ltd
