// LoginGroups (process/exec_shim_args.h) for lt-shim, which is linked
// statically and so runs no NSS: a job's groups come in its record, and
// ltd starts lt-shim-etcd (glibc shared) for a record that names none.
// Linked ahead of ltd_process, whose login_groups.cc it stands in for.
#include "exec_shim_args.h"
#include "spdlog/spdlog.h"

namespace ltd {

std::optional<std::vector<gid_t>> LoginGroups(uid_t uid, gid_t) {
  spdlog::error(
      "cannot look up the groups of uid {}: lt-shim runs no NSS, and the job's record names no "
      "groups (ltd gives such a job to lt-shim-etcd)",
      uid);
  return std::nullopt;
}

}  // namespace ltd
