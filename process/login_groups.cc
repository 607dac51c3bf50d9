// LoginGroups (exec_shim_args.h) through NSS. A program linked statically
// links shim/login_groups_none.cc instead, which runs no NSS.
#include <grp.h>
#include <limits.h>
#include <pwd.h>

#include <algorithm>
#include <cerrno>

#include "exec_shim_args.h"

namespace ltd {

std::optional<std::vector<gid_t>> LoginGroups(uid_t uid, gid_t gid) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  while (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == ERANGE && buf.size() < (1u << 22))
    buf.resize(buf.size() * 2);
  if (found == nullptr) return std::vector<gid_t>{gid};
  std::vector<gid_t> groups(64);
  for (;;) {
    int n = static_cast<int>(groups.size());
    if (getgrouplist(pw.pw_name, gid, groups.data(), &n) >= 0) {
      groups.resize(static_cast<size_t>(n));
      return groups;
    }
    // More than fit: as initgroups does, at most the kernel's limit (the
    // first ones, which getgrouplist has filled in).
    if (groups.size() >= NGROUPS_MAX) return groups;
    groups.resize(std::min<size_t>(
        std::max<size_t>(static_cast<size_t>(std::max(n, 0)), groups.size() * 2), NGROUPS_MAX));
  }
}

}  // namespace ltd
