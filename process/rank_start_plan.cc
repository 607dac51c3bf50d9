#include "rank_start_plan.h"

#include "auto_instrument.h"

namespace ltd {
namespace {

// The value of KEY in `env`, or "" (also when it is empty).
std::string EnvValue(const std::vector<std::string>& env, const std::string& key) {
  for (const std::string& kv : env) {
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=')
      return kv.substr(key.size() + 1);
  }
  return "";
}

}  // namespace

std::vector<char*> RankStartPlan::Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

RankStartPlan::RankStartPlan(const std::vector<std::string>& cgroups, std::optional<User> user,
                             std::vector<RankLimit> limits, pid_t parent, What what)
    : cgroups_(cgroups),
      user_(std::move(user)),
      limits_(std::move(limits)),
      what_(std::move(what)) {
  for (const std::string& dir : cgroups) cgroup_procs_.push_back(dir + "/cgroup.procs");
  for (const std::string& procs : cgroup_procs_) cgroup_ptrs_.push_back(procs.c_str());
  start_.cgroup_procs = cgroup_ptrs_.data();
  start_.cgroup_count = cgroup_ptrs_.size();
  if (user_) {
    start_.change_user = true;
    start_.uid = user_->uid;
    start_.gid = user_->gid;
    start_.groups = user_->groups.data();
    start_.group_count = user_->groups.size();
    if (user_->later) {
      // Left unwritten (and so, mostly, untouched) until the groups come.
      groups_text_.reset(new char[kMaxGroupsText + 1]);
      groups_read_.reset(new gid_t[kMaxGroups]);
      start_.groups_later = true;
      start_.groups_text = groups_text_.get();
      start_.groups_read = groups_read_.get();
    }
  }
  start_.limits = limits_.data();
  start_.limit_count = limits_.size();
  start_.parent = parent;
  start_.cwd = what_.cwd.c_str();
  argv_ = Pointers(what_.argv);
  start_.argv = argv_.data();
  if (HasAutoHeartbeatRequest(what_.env)) {
    granted_ = ApplyAutoHeartbeat(what_.env, /*may_run_python=*/true);
    dropped_ = ApplyAutoHeartbeat(what_.env, /*may_run_python=*/false);
    env_granted_ = Pointers(granted_);
    env_dropped_ = Pointers(dropped_);
    start_.env_granted = env_granted_.data();
    start_.env_dropped = env_dropped_.data();
  }
  env_ = Pointers(what_.env);
  start_.env = env_.data();
  path_ = EnvValue(what_.env, "PATH");
  if (path_.empty()) path_ = "/usr/local/bin:/usr/bin:/bin";
  start_.path = path_.c_str();
}

}  // namespace ltd
