// How the processes of a job are held so that none outlives it. The
// launcher spawns and reaps ranks; a Containment knows every process a job
// made, ranks' descendants included, and can kill them all.
//
//   process-group  each rank leads its own group; escapees are missed
//   subreaper      ltd is a child subreaper; descendants carry LT_JOB_ID
//   cgroup         a cgroup v2 leaf per rank under a job cgroup
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "job_limits.h"

namespace ltd {

class Containment {
 public:
  virtual ~Containment() = default;
  virtual std::string_view name() const = 0;
  // Fails, in one line, when `limits` cannot be set: a job never runs
  // without the limits it asked for.
  virtual absl::Status BeginJob(const std::string& job_id, const JobLimits& limits) = 0;
  // The cgroups the exec shim puts rank `rank` in (none when the rank
  // needs nothing): its own, and the job's in each v1 hierarchy that
  // holds a limit of it.
  virtual std::vector<std::string> RankCgroups(const std::string& job_id, int rank) = 0;
  // How many of the job's processes (of rank `rank`'s, when each rank has
  // a memory limit of its own) the OOM killer killed in this attempt;
  // nullopt without a memory limit.
  virtual std::optional<uint64_t> OomKills(const std::string& job_id, int rank) {
    (void)job_id;
    (void)rank;
    return std::nullopt;
  }
  // The CPU time the job's processes used in its last attempt, from their
  // start as ranks to the emptying that EndJob waited for (then forgotten:
  // asked once). nullopt where this containment cannot count it.
  virtual std::optional<std::chrono::microseconds> TakeCpuUsed(const std::string& job_id) {
    (void)job_id;
    return std::nullopt;
  }
  // SIGKILL everything of the job. `rank_pids` are the ranks not yet
  // reaped (checked by the caller just now, on the thread that reaps), so
  // their pids and process groups are still theirs; a reaped rank's number
  // may belong to anyone and is never passed.
  virtual void KillJob(const std::string& job_id, const std::vector<pid_t>& rank_pids) = 0;
  // on_empty once nothing of the job is left; later, never re-entrantly.
  virtual void EndJob(const std::string& job_id, std::function<void()> on_empty) = 0;

  // A process of the job still there (a rank's descendant, the ranks being
  // reaped): its pid and the rank whose cgroup holds it (-1 when the
  // containment cannot tell). At most `max`, from the kernel's lists, so a
  // job that forked without bound costs a bounded read.
  struct Left {
    pid_t pid = 0;
    int rank = -1;
  };
  virtual std::vector<Left> Remaining(const std::string& job_id, size_t max) {
    (void)job_id;
    (void)max;
    return {};
  }
  // The job ends without what is left of it (processes the kernel will not
  // let die): EndJob's wait stops, on_empty never runs, and what holds them
  // (the job's cgroups) stays for whoever cleans up once they are gone.
  virtual void Forget(const std::string& job_id) { (void)job_id; }
  // The launcher reaps the ranks it spawned; a containment that reaps
  // adopted orphans must leave the pids `is_rank` names alone, or a rank's
  // exit status would be lost. Set once, before the first spawn.
  virtual void LeaveToLauncher(std::function<bool(pid_t)> is_rank) { (void)is_rank; }
};

}  // namespace ltd
