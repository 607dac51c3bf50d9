// A RankStart (rank_start.h) with everything it points to, made before the
// rank's process starts: the one place that turns what to run, as whom
// and where into the steps' plain arrays. Standard library only (lt-exec
// builds one from its arguments).
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rank_start.h"

namespace ltd {

// Whom a rank becomes. (Outside the class: clang cannot default-construct
// a nested struct with member initializers inside std::optional of it.)
struct RankUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // as looked up; empty with `later`
  bool later = false;         // the groups come on kRankGroupsFd
};

// What it runs, and where.
struct RankProgram {
  std::string cwd;
  std::vector<std::string> argv;
  std::vector<std::string> env;
};

class RankStartPlan {
 public:
  using User = RankUser;
  using What = RankProgram;

  // `cgroups`: the directories to join; `parent`: 0, or the pid the rank
  // must still be a child of once it asked to die with it.
  RankStartPlan(const std::vector<std::string>& cgroups, std::optional<User> user,
                std::vector<RankLimit> limits, pid_t parent, What what);
  RankStartPlan(const RankStartPlan&) = delete;
  RankStartPlan& operator=(const RankStartPlan&) = delete;

  const RankStart& start() const { return start_; }
  const std::vector<std::string>& cgroups() const { return cgroups_; }
  const std::optional<User>& user() const { return user_; }
  const std::vector<RankLimit>& limits() const { return limits_; }
  const What& what() const { return what_; }

 private:
  static std::vector<char*> Pointers(std::vector<std::string>& strings);

  std::vector<std::string> cgroups_, cgroup_procs_;
  std::vector<const char*> cgroup_ptrs_;
  std::optional<User> user_;
  std::unique_ptr<char[]> groups_text_;
  std::unique_ptr<gid_t[]> groups_read_;
  std::vector<RankLimit> limits_;
  What what_;
  std::vector<std::string> granted_, dropped_;
  std::vector<char*> argv_, env_, env_granted_, env_dropped_;
  std::string path_;
  RankStart start_;
};

}  // namespace ltd
