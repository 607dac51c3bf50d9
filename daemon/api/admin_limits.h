// The resource limits an admin set for a user, as pam_limits would give a
// login session of theirs: /etc/security/limits.conf, then limits.d/*.conf
// in name order (model/limits_conf.h says how lines apply), over ltd's own
// limits as it started, and never above those hard limits (a rank's
// lt-exec sets limits as the user, who cannot raise a hard one). ltd reads
// the files itself rather than opening a PAM session per job, as slurmd's
// UsePAM does: the same limits, without running every session module of
// the host's PAM stack (pam_systemd's logins, pam_mkhomedir, ...) as root
// for each job.
//
// The files are read as root, so they are taken with care: only regular
// files owned by root and writable by no one else (one a user could write
// would let them raise their own limits: skipped, and logged), opened
// without blocking (a FIFO), at most LimitsConf::kMaxBytes each and
// kMaxFiles of limits.d. Asks NSS for the user's groups: not on the loop.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "resource_limits.h"

namespace ltd {

inline constexpr size_t kMaxLimitsFiles = 256;

// `dir`: where limits.conf and limits.d are (/etc/security).
std::vector<ResourceLimit> AdminLimits(uid_t uid, gid_t gid,
                                       const std::string& dir = "/etc/security",
                                       const std::vector<ResourceLimit>& start = StartLimits());

}  // namespace ltd
