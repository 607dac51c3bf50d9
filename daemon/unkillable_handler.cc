#include "unkillable_handler.h"

#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

UnkillableHandler::UnkillableHandler(uv_loop_t* loop, ContainmentPlan plan, std::string program,
                                     std::chrono::milliseconds deadline)
    : plan_(std::move(plan)), program_(loop, std::move(program), deadline) {}

void UnkillableHandler::OnUnkillable(const Job& job) {
  std::string pids, lines;
  for (const UnkillableProcess& p : job.unkillable) {
    if (p.gone_at) continue;
    pids += Cat(pids.empty() ? "" : " ", p.pid);
    lines += Cat(p.rank, " ", p.pid, " ", p.state.empty() ? "?" : p.state, " ",
                 p.wchan.empty() ? "-" : p.wchan, " ", p.descendant ? "descendant" : "rank", "\n");
  }
  std::string slots;
  for (int slot : job.device_slots) slots += Cat(slots.empty() ? "" : ",", slot);
  program_.Run({Cat("LTD_JOB_ID=", job.id), Cat("LTD_JOB_USER=", job.user),
                Cat("LTD_UNKILLABLE_PIDS=", pids), Cat("LTD_UNKILLABLE=", lines),
                Cat("LTD_DEVICE_SLOTS=", slots), Cat("LTD_GPUS=", job.cuda_visible_devices)},
               Cat("job=", job.id, " unkillable program"));
}

void UnkillableHandler::OnUnkillableGone(const std::string& job_id) {
  // Its supervisor could not remove the cgroups that held it; nothing of
  // the job lives in them now.
  const int killed = KillInstance(plan_, SupervisorInstance(job_id));
  if (killed > 0)
    spdlog::warn("job={} {} process(es) were left in its cgroups; killed", job_id, killed);
}

}  // namespace ltd
