// Picks how jobs are contained on this host: cgroup v2 where ltd may write
// its cgroup subtree, else a child subreaper, else process groups. Names
// first, so that ltd can sweep what dead processes left (sparing the
// supervisors it adopts) before anything new exists:
//
//   plan = PlanContainment(store);        // names only, creates nothing
//   SweepLeftovers(plan, keep);           // kills the rest of this state's
//   SetUpContainment(loop, mode, plan);   // creates
//
// Each job's supervisor is an instance of its own (SupervisorInstance):
// its cgroup subtree and its ranks' marker are the job's alone.
#pragma once

#include <uv.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cgroup_limits.h"
#include "containment.h"
#include "job_store.h"

namespace ltd {

struct ContainmentPlan {
  // LT_DAEMON_TAG=<state tag>.<instance>: goes into every rank's
  // environment (RunnerConfig::extra_rank_env) and marks the instance's
  // processes for the subreaper mode and the sweeps.
  std::string rank_marker;
  std::string state_tag;  // shared by every ltd on this state dir
  std::string instance;   // this ltd process
  // <own cgroup>/ltd-<state tag>, or empty with the reason in cgroup_error.
  std::string cgroup_base;
  absl::Status cgroup_error;
  std::string run_dir() const { return cgroup_base + "/run-" + instance; }
  // Where jobs' memory and CPU limits go (cgroup_limits.h); with the v1
  // layout the jobs have cgroups under <own v1 cgroup>/ltd-<state tag> too.
  LimitPlaces limits;
  // Those v1 bases, for the sweeps.
  std::vector<std::string> v1_bases() const;
};

// `instance` names this process's jobs (default: a random one per ltd).
// `device_program_proven`: the cgroup2 cgroup where ltd attached a device
// program (a supervisor it started is in it: FindDevicePlace).
ContainmentPlan PlanContainment(const JobStore& store, std::string instance = "",
                                const std::string& device_program_proven = "");
// PlanContainment in two steps: where (this process's cgroups, the state
// dir's tag; no instance yet), then whose. A spare supervisor finds where
// once and serves each of its jobs from there, as ltd, which started it,
// found its own at its start.
ContainmentPlan PlanPlaces(const JobStore& store, const std::string& device_program_proven = "");
ContainmentPlan ForInstance(ContainmentPlan places, std::string instance);

// The instance of a job's supervisor: its cgroup run-job<ID>, its ranks'
// marker LT_DAEMON_TAG=<tag>.job<ID>.
std::string SupervisorInstance(const std::string& job_id);

// Kills and removes what processes of this state dir left: cgroups and
// marked processes of every instance but `keep` (this ltd's, and those of
// supervisors still alive).
void SweepLeftovers(const ContainmentPlan& plan, const std::vector<std::string>& keep);

// Removes the empty cgroups SIGKILLed ltruns left beside this process's
// own (stale_runs.h), in the v2 hierarchy and each v1 one of `plan`.
void SweepStaleLtruns(const ContainmentPlan& plan);

// Kills what is left of one instance (a supervisor that died), escaped
// descendants too, and removes its cgroup. Returns how many processes it
// found.
int KillInstance(const ContainmentPlan& plan, const std::string& instance);

// Builds the containment. `mode`: "auto", "cgroup", "subreaper" or
// "process-group". Fails, with a one-line message that says what to do,
// when the mode asked for cannot be had; "auto" falls back instead and
// logs why. `proven`: whoever chose `mode` (ltd, for a supervisor) found it
// working on this state dir's cgroup base, so it is not probed again (a
// fork and a cgroup, some milliseconds of every job's start).
absl::StatusOr<std::unique_ptr<Containment>> SetUpContainment(uv_loop_t* loop,
                                                              const std::string& mode,
                                                              const ContainmentPlan& plan,
                                                              bool proven = false);

// Why a job's memory (`memory`) or CPU (`cpu`) limit, or its GPUs'
// isolation (`devices`), cannot be set by
// this ltd's supervisors, in one line each; empty when it can. Run after
// SetUpContainment named the mode (`containment`), which made the base:
// it enables the controllers from ltd's own cgroup down to it (v2) and
// makes the v1 bases, as every job with a limit needs.
struct LimitSupport {
  std::string memory;
  std::string cpu;
  std::string devices;  // GPU isolation (gpu_devices.h)
};
LimitSupport ProbeLimitSupport(const ContainmentPlan& plan, std::string_view containment);

// Both steps, without a guardian.
absl::StatusOr<std::unique_ptr<Containment>> MakeContainment(uv_loop_t* loop,
                                                             const std::string& mode,
                                                             const JobStore& store);

}  // namespace ltd
