// ltd's side of per-job supervisors: starts an lt-shim for each job it
// places (the spare's, when one is ready), watches it over the supervisor
// protocol (proto/shim.proto) through a ShimLink, and adopts the supervisors an
// earlier ltd left. Loop thread, except Probe (start-up).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "containment_factory.h"
#include "job_store.h"
#include "loop.h"
#include "shim_link.h"
#include "shim_probe.h"
#include "shim_spawner.h"
#include "spare_pool.h"
#include "supervision.h"

namespace ltd {

class ShimSupervisorHost final : public SupervisorHost {
 public:
  // `plan`: ltd's containment plan, to find what a dead supervisor left.
  ShimSupervisorHost(Loop& loop, const JobStore& store, ContainmentPlan plan, ShimConfig config);
  ~ShimSupervisorHost() override;
  ShimSupervisorHost(const ShimSupervisorHost&) = delete;
  ShimSupervisorHost& operator=(const ShimSupervisorHost&) = delete;

  std::string_view containment() const override { return config_.containment; }
  std::unique_ptr<Supervision> Start(const Job& job, SupervisionEvents& events) override;

  using Found = FoundShim;
  // Asks the supervisors of `job_ids` who they are (ProbeShims). Blocks.
  std::map<std::string, Found> Probe(const std::vector<std::string>& job_ids,
                                     std::chrono::milliseconds timeout) {
    return ProbeShims(store_, canonical_state_dir_, job_ids, timeout);
  }
  std::unique_ptr<Supervision> Adopt(const Job& job, Found found, SupervisionEvents& events);

  // Keeps a spare supervisor ready from the loop's next turn on (and a new
  // one soon after a job takes it). Killed with this host, and gone by
  // itself once ltd is.
  void KeepSpare() { spares_.Prepare(std::chrono::milliseconds(0)); }

 private:
  std::unique_ptr<Supervision> Watch(const std::string& job_id, pid_t pid, Fd pidfd,
                                     std::unique_ptr<ShimChannel> channel,
                                     SupervisionEvents& events, bool from_start);
  void Forget(ShimLink* link);
  // The supervisor `pid` is free for another job: its link lets go.
  void Release(pid_t pid);

  Loop& loop_;
  const JobStore& store_;
  const ContainmentPlan plan_;
  const ShimConfig config_;
  std::string canonical_state_dir_;
  const ShimLink::Context context_;
  // Every supervisor not yet reaped or free again, ended jobs' too (they
  // exit, or say they are free, just after).
  std::set<std::shared_ptr<ShimLink>> links_;
  SparePool spares_;
};

}  // namespace ltd
