// What ltd does beyond the job table when a job ends with ranks that
// would not die: runs the admin's --unkillable-program (as Slurm's
// UnkillableStepProgram; told LTD_JOB_ID, LTD_UNKILLABLE_PIDS and
// LTD_UNKILLABLE, one "RANK PID STATE WCHAN KIND" per line, KIND "rank"
// for a rank itself, "descendant" for a process a rank started, whose RANK
// is -1 when the containment cannot tell), and, once they
// are gone, removes what their supervisor had to leave of the job (its
// cgroups).
#pragma once

#include <uv.h>

#include <chrono>
#include <string>

#include "admin_program.h"
#include "containment_factory.h"
#include "job_events.h"

namespace ltd {

class UnkillableHandler final : public JobEvents {
 public:
  UnkillableHandler(uv_loop_t* loop, ContainmentPlan plan, std::string program,
                    std::chrono::milliseconds deadline);
  void OnUnkillable(const Job& job) override;
  void OnUnkillableGone(const std::string& job_id) override;

 private:
  const ContainmentPlan plan_;
  AdminProgram program_;
};

}  // namespace ltd
