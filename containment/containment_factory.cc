#include "containment_factory.h"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "cgroup_containment.h"
#include "cgroup_fs.h"
#include "process_group_containment.h"
#include "process_scan.h"
#include "spdlog/spdlog.h"
#include "stale_runs.h"
#include "state_tag.h"
#include "str_util.h"
#include "subreaper_containment.h"

namespace ltd {
namespace {

// Unique per ltd process, so a dead ltd's guardian and a new ltd on the
// same state dir never mistake each other's jobs.
std::string InstanceId() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
    v = static_cast<uint64_t>(getpid()) << 32 ^
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  return Hex64(v);
}

}  // namespace

std::string SupervisorInstance(const std::string& job_id) { return "job" + job_id; }

ContainmentPlan PlanContainment(const JobStore& store, std::string instance,
                                const std::string& device_program_proven) {
  return ForInstance(PlanPlaces(store, device_program_proven),
                     instance.empty() ? InstanceId() : std::move(instance));
}

ContainmentPlan ForInstance(ContainmentPlan plan, std::string instance) {
  plan.instance = std::move(instance);
  plan.rank_marker = Cat("LT_DAEMON_TAG=", plan.state_tag, ".", plan.instance);
  return plan;
}

ContainmentPlan PlanPlaces(const JobStore& store, const std::string& device_program_proven) {
  ContainmentPlan plan;
  plan.state_tag = StateTag(store.state_dir());
  // Read once: the kernel writes mountinfo out anew, mount by mount, at
  // each read.
  const absl::StatusOr<std::string> mountinfo = ReadWholeFile("/proc/self/mountinfo");
  const absl::StatusOr<std::string> proc_cgroup = ReadWholeFile("/proc/self/cgroup");
  const absl::StatusOr<std::string> own = !mountinfo.ok() ? mountinfo.status()
                                          : !proc_cgroup.ok()
                                              ? proc_cgroup.status()
                                              : OwnCgroupDir(*mountinfo, *proc_cgroup);
  std::string own_v2;
  if (own.ok()) {
    own_v2 = *own;
    plan.cgroup_base = Cat(*own, "/ltd-", plan.state_tag);
  } else {
    plan.cgroup_error = own.status();
  }
  plan.limits = FindLimitPlaces(own_v2, mountinfo.value_or(""), proc_cgroup.value_or(""),
                                device_program_proven);
  return plan;
}

std::vector<std::string> ContainmentPlan::v1_bases() const {
  std::vector<std::string> bases;
  for (const ControllerPlace* place : {&limits.memory, &limits.cpu, &limits.devices}) {
    if (place->layout != CgroupLayout::kV1) continue;
    std::string base = Cat(place->own_dir, "/ltd-", state_tag);
    if (std::find(bases.begin(), bases.end(), base) == bases.end()) bases.push_back(base);
  }
  return bases;
}

LimitSupport ProbeLimitSupport(const ContainmentPlan& plan, std::string_view containment) {
  LimitSupport support;
  auto why = [&](const ControllerPlace& place, std::string_view controller) -> std::string {
    if (containment != "cgroup") {
      return Cat("limits need cgroup containment, and this ltd runs jobs with ", containment,
                 " containment (",
                 plan.cgroup_error.ok() ? "--containment" : plan.cgroup_error.message(), ")");
    }
    if (place.layout == CgroupLayout::kNone) return std::string(place.why.message());
    absl::Status s = absl::OkStatus();
    if (place.layout == CgroupLayout::kV2) {
      s = EnableV2Controller(place.own_dir, plan.cgroup_base, controller);
    } else {
      // Made and removed: each supervisor makes it for its jobs, and
      // removes it with its last job once empty.
      const std::string base = Cat(place.own_dir, "/ltd-", plan.state_tag);
      const bool existed = access(base.c_str(), F_OK) == 0;
      s = MakeCgroupDir(base);
      if (s.ok() && !existed) rmdir(base.c_str());
      if (!s.ok()) {
        s = absl::FailedPreconditionError(Cat("cannot make cgroups in the v1 hierarchy of the ",
                                              controller, " controller: ", s.message()));
      }
    }
    return s.ok() ? "" : std::string(s.message());
  };
  support.memory = why(plan.limits.memory, "memory");
  support.cpu = why(plan.limits.cpu, "cpu");
  // v2 needs no controller: FindDevicePlace attached a program already.
  support.devices = plan.limits.devices.layout == CgroupLayout::kV2 && containment == "cgroup"
                        ? ""
                        : why(plan.limits.devices, "devices");
  return support;
}

void SweepLeftovers(const ContainmentPlan& plan, const std::vector<std::string>& keep) {
  // What earlier processes on this state dir left, should they have died
  // with nobody able to clean up: their cgroups and their marked processes.
  const std::string& base = plan.cgroup_base;
  if (!base.empty() && access(base.c_str(), F_OK) == 0) {
    std::set<std::string> kept;
    for (const std::string& k : keep) kept.insert("run-" + k);
    const int swept = SweepCgroupLeftovers(base, kept, std::chrono::seconds(5));
    if (swept > 0) spdlog::warn("removed {} cgroup subtree(s) left by an earlier ltd", swept);
  }
  for (const std::string& v1 : plan.v1_bases()) {
    if (access(v1.c_str(), F_OK) != 0) continue;
    std::set<std::string> kept;
    for (const std::string& k : keep) kept.insert("run-" + k);
    const int swept = SweepCgroupLeftovers(v1, kept, std::chrono::seconds(5));
    if (swept > 0)
      spdlog::warn("removed {} cgroup subtree(s) in {} left by an earlier ltd", swept, v1);
  }
  const std::string tag_prefix = Cat("LT_DAEMON_TAG=", plan.state_tag, ".");
  std::vector<std::string> kept_markers;
  for (const std::string& k : keep) kept_markers.push_back(tag_prefix + k);
  const int killed = KillProcesses(
      [&](const ProcEnviron& env) {
        if (!env.HasPrefix(tag_prefix)) return false;
        for (const std::string& m : kept_markers) {
          if (env.Has(m)) return false;
        }
        return true;
      },
      20);
  if (killed > 0) spdlog::warn("killed {} process(es) left by an earlier ltd", killed);
}

void SweepStaleLtruns(const ContainmentPlan& plan) {
  std::vector<std::string> owns;
  if (!plan.cgroup_base.empty())
    owns.push_back(plan.cgroup_base.substr(0, plan.cgroup_base.rfind('/')));
  for (const std::string& v1 : plan.v1_bases()) owns.push_back(v1.substr(0, v1.rfind('/')));
  const int removed = RemoveStaleLtrunCgroups(owns);
  if (removed > 0) spdlog::info("removed {} empty cgroup(s) of ltruns that were killed", removed);
}

int KillInstance(const ContainmentPlan& plan, const std::string& instance) {
  int found = 0;
  if (!plan.cgroup_base.empty()) {
    const std::string dir = Cat(plan.cgroup_base, "/run-", instance);
    if (access(dir.c_str(), F_OK) == 0) {
      found += CountCgroupProcs(dir);
      (void)KillCgroup(dir);
      if (WaitEmpty(dir, std::chrono::seconds(1))) (void)RemoveCgroupTree(dir);
    }
  }
  const std::string marker = Cat("LT_DAEMON_TAG=", plan.state_tag, ".", instance);
  found += KillProcesses([&](const ProcEnviron& env) { return env.Has(marker); }, 20);
  // Its jobs' v1 cgroups, empty now that their processes are gone.
  for (const std::string& v1 : plan.v1_bases()) {
    const std::string dir = Cat(v1, "/run-", instance);
    if (access(dir.c_str(), F_OK) == 0 && WaitEmpty(dir, std::chrono::seconds(1))) {
      (void)RemoveCgroupTree(dir);
    }
  }
  return found;
}

absl::StatusOr<std::unique_ptr<Containment>> SetUpContainment(uv_loop_t* loop,
                                                              const std::string& mode,
                                                              const ContainmentPlan& plan,
                                                              bool proven) {
  const std::string& base = plan.cgroup_base;
  if (mode == "cgroup" || mode == "auto") {
    absl::Status why = plan.cgroup_error;
    if (!base.empty()) {
      auto cg = CgroupContainment::Create(loop, base, "run-" + plan.instance, proven, plan.limits);
      if (cg.ok()) {
        spdlog::info("containment: cgroup, jobs under {}", (*cg)->run_dir());
        return std::unique_ptr<Containment>(std::move(*cg));
      }
      why = cg.status();
    }
    if (mode == "cgroup") {
      return absl::FailedPreconditionError(
          Cat("--containment cgroup: cgroups cannot be used here (", why.message(),
              "); run ltd as root or under systemd with Delegate=yes, or use --containment "
              "subreaper"));
    }
    spdlog::warn("cgroup containment unavailable ({}); falling back to subreaper",
                 std::string(why.message()));
  }
  if (mode == "subreaper" || mode == "auto") {
    auto sr = SubreaperContainment::Create(loop, plan.rank_marker);
    if (sr.ok()) {
      spdlog::info("containment: subreaper, jobs known by {} and LT_JOB_ID", plan.rank_marker);
      return std::unique_ptr<Containment>(std::move(*sr));
    }
    if (mode == "subreaper") {
      return absl::FailedPreconditionError(Cat("--containment subreaper: ", sr.status().message(),
                                               "; use --containment process-group"));
    }
    spdlog::warn("subreaper containment unavailable ({}); falling back to process groups",
                 std::string(sr.status().message()));
  }
  spdlog::warn(
      "containment: process-group; processes that leave their rank's process group survive "
      "teardown while ltd lives");
  return std::unique_ptr<Containment>(std::make_unique<ProcessGroupContainment>(loop));
}

absl::StatusOr<std::unique_ptr<Containment>> MakeContainment(uv_loop_t* loop,
                                                             const std::string& mode,
                                                             const JobStore& store) {
  const ContainmentPlan plan = PlanContainment(store);
  SweepLeftovers(plan, {plan.instance});
  return SetUpContainment(loop, mode, plan);
}

}  // namespace ltd
