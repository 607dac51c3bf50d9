#include "become_user.h"

#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ltd::userio {
namespace {

std::string Failed(const char* call, int err) {
  return std::string(call) + ": " + std::strerror(err);
}

// The capability sets of this process (effective, permitted, inheritable),
// through the raw call: no libcap in a helper this small.
bool Capabilities(__user_cap_data_struct (&data)[2]) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  return syscall(SYS_capget, &header, data) == 0;
}

}  // namespace

std::string BecomeUser(bool change, uid_t uid, gid_t gid, const std::vector<gid_t>& groups) {
  if (change) {
    // Groups first: setgroups needs CAP_SETGID, gone with the uid.
    const std::vector<gid_t> just_gid = {gid};
    const std::vector<gid_t>& set = groups.empty() ? just_gid : groups;
    if (setgroups(set.size(), set.data()) != 0) return Failed("setgroups", errno);
    if (setresgid(gid, gid, gid) != 0) return Failed("setresgid", errno);
    if (setresuid(uid, uid, uid) != 0) return Failed("setresuid", errno);
  }
  uid_t ruid, euid, suid;
  gid_t rgid, egid, sgid;
  if (getresuid(&ruid, &euid, &suid) != 0) return Failed("getresuid", errno);
  if (getresgid(&rgid, &egid, &sgid) != 0) return Failed("getresgid", errno);
  if (ruid != uid || euid != uid || suid != uid || rgid != gid || egid != gid || sgid != gid) {
    return "the ids are not uid " + std::to_string(uid) + " and gid " + std::to_string(gid) +
           " throughout";
  }
  if (uid != 0 && setresuid(0, 0, 0) == 0) return "root could be regained after setresuid";
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return Failed("prctl(PR_SET_NO_NEW_PRIVS)", errno);
  if (uid == 0) return {};
  // The uid change cleared the effective and permitted sets; the
  // inheritable and ambient ones are dropped here, then all are checked.
  (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct none[2] = {};
  if (syscall(SYS_capset, &header, none) != 0) return Failed("capset", errno);
  __user_cap_data_struct held[2] = {};
  if (!Capabilities(held)) return Failed("capget", errno);
  for (const auto& d : held) {
    if (d.effective != 0 || d.permitted != 0 || d.inheritable != 0) {
      return "a capability is still held after becoming uid " + std::to_string(uid);
    }
  }
  return {};
}

void CloseFdsFrom(int first) {
  if (syscall(SYS_close_range, first, ~0U, 0) == 0) return;
  // Kernels before 5.9.
  const long max = sysconf(_SC_OPEN_MAX);
  for (long fd = first; fd < (max > 0 ? max : 65536); ++fd) close(static_cast<int>(fd));
}

}  // namespace ltd::userio
