// Who the caller is to ltd beyond being a user: root or a member of the
// admin group (drain, resume, every job's details), and what of another
// user's job a caller sees (--private-data).
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "api_convert.h"
#include "bytes.h"
#include "job_privacy.h"
#include "service.h"
#include "str_util.h"

namespace ltd {

absl::Status LtdService::SetAdminGroup(const std::string& group) {
  admin_group_ = group;
  admin_gid_.reset();
  if (group.empty()) return absl::OkStatus();
  struct group gr {};
  struct group* found = nullptr;
  std::vector<char> buf(1 << 16);
  if (getgrnam_r(group.c_str(), &gr, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return absl::InvalidArgumentError(
        Cat("--admin-group '", group, "': no such group on this host; create it or leave it out"));
  }
  admin_gid_ = found->gr_gid;
  return absl::OkStatus();
}

bool LtdService::SeesAllDetails(const PeerCreds& who) const {
  return !private_jobs_ || IsAdmin(who);
}

void LtdService::ForCaller(const Job& job, uid_t who, bool all, v1::Job* view) {
  if (!all && job.spec.uid != who) HideOthersDetails(view);
}

void LtdService::View(const Job& job, const ViewLimits& limits, v1::Job* view) const {
  ToProto(job, limits, view);
  if (job.state == JobState::kPending) {
    view->set_pending_reason(DisplayEscapeElided(manager_.PendingReason(job), limits.text));
  }
}

bool LtdService::IsAdmin(const PeerCreds& who) const {
  if (who.uid == 0) return true;
  if (!admin_gid_) return false;
  if (who.gid == *admin_gid_) return true;
  // The group database's word, as for a login: the caller's user is a member.
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(who.uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return false;
  }
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (getgrouplist(found->pw_name, found->pw_gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(n));
    if (getgrouplist(found->pw_name, found->pw_gid, groups.data(), &n) < 0) return false;
  }
  groups.resize(static_cast<size_t>(n));
  return std::find(groups.begin(), groups.end(), *admin_gid_) != groups.end();
}

}  // namespace ltd
