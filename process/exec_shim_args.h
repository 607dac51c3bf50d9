// How lt-exec (exec_shim.cc) is told whom to become: the process layer's
// one place that builds its `--user` and `--groups` arguments.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace ltd {

// The groups `uid` gets at login with primary group `gid` (getgrouplist,
// through NSS, so LDAP or sssd groups too); just `gid` when the uid has
// no passwd entry. Looked up here, in the caller, once per job attempt:
// lt-exec itself then runs no NSS at all, a quarter of its CPU (1.5 ms of
// some 5.5 ms per rank on the project's VM).
std::vector<gid_t> LoginGroups(uid_t uid, gid_t gid);

// `--user UID:GID --groups G1,G2,...` appended to `argv` when the process
// must become uid:gid (a long list of groups as several --groups, each
// far below the kernel's limit on one argument); nothing when the caller
// already is that user.
void AppendUserArgs(uid_t uid, gid_t gid, const std::vector<gid_t>& groups,
                    std::vector<std::string>& argv);

}  // namespace ltd
