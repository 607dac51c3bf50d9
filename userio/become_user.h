// lt-userio's first act: become the job's user completely, before it
// touches any path the user named. Not a changed fsuid on a root thread
// (which keeps euid 0 and every capability: procfs checks euid, a
// /proc/PID/uid_map write checks the opener's CAP_SETUID), but a process
// whose real, effective and saved ids and groups are the user's, that
// holds no capability and can gain none (no_new_privs).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace ltd::userio {

// `change`: become uid:gid with `groups` exactly (root looked them up: no
// NSS here); without it this process must already be uid:gid (ltrun
// without root). Then checks what it got: every id the user's, no way back
// to root, no capability (for a uid other than 0; root's own jobs keep
// root's rights). Empty on success, else why not (one line).
std::string BecomeUser(bool change, uid_t uid, gid_t gid, const std::vector<gid_t>& groups);

// Closes every fd from `first` up.
void CloseFdsFrom(int first);

}  // namespace ltd::userio
