#include "shim_host.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "framed_shim_channel.h"
#include "grpc_shim_channel.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

// How long after a job took the spare the next one starts. Even at idle
// priority a spare's start slows the job that just took the last one:
// ltd's loop waits for its execve while placing that job, and the CPU is
// the job's ranks'. Bench: submit to exit of 8 ranks of /bin/true went
// from 104-108 ms to 91-95 ms. Jobs submitted within this of each other
// start their own supervisors, as without a spare.
constexpr auto kNextSpareDelay = std::chrono::milliseconds(250);

std::string Canonical(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? resolved : path;
}

}  // namespace

ShimSupervisorHost::ShimSupervisorHost(Loop& loop, const JobStore& store, ContainmentPlan plan,
                                       ShimConfig config)
    : loop_(loop),
      store_(store),
      plan_(std::move(plan)),
      config_(std::move(config)),
      canonical_state_dir_(Canonical(store_.state_dir())),
      context_{loop_, store_, plan_, [this](ShimLink* link) { Forget(link); }},
      spares_(
          loop_, [this](Fd* assign) { return SpawnShim(config_, store_.state_dir(), "", assign); },
          [this](pid_t pid) { Release(pid); }) {}

ShimSupervisorHost::~ShimSupervisorHost() {
  for (const auto& link : links_) link->Detach();
}

void ShimSupervisorHost::Forget(ShimLink* link) {
  for (auto it = links_.begin(); it != links_.end(); ++it) {
    if (it->get() == link) {
      links_.erase(it);
      return;
    }
  }
}

void ShimSupervisorHost::Release(pid_t pid) {
  for (const auto& link : links_) {
    // An earlier job's link may wait for its stream's end still.
    if (link->pid() == pid && link->Released()) return;  // may erase it
  }
}

std::unique_ptr<Supervision> ShimSupervisorHost::Watch(const std::string& job_id, pid_t pid,
                                                       Fd pidfd,
                                                       std::unique_ptr<ShimChannel> channel,
                                                       SupervisionEvents& events, bool from_start) {
  auto link = ShimLink::Watch(context_, job_id, pid, std::move(pidfd), std::move(channel), events,
                              from_start);
  links_.insert(link);
  return ShimLink::SupervisionOf(std::move(link));
}

std::unique_ptr<Supervision> ShimSupervisorHost::Start(const Job& job, SupervisionEvents& events) {
  auto fail = [&](std::string why) -> std::unique_ptr<Supervision> {
    spdlog::error("job={} cannot start its supervisor: {}", job.id, why);
    events.OnLost(Cat("ltd could not start the job's supervisor: ", why));
    return nullptr;
  };
  // The supervisor starts from the record, which ltd saved placed, with
  // its environment (JobManager::StartSupervision).
  // A multi-node run's supervisor speaks to etcd over gRPC: a program of
  // its own, so that every other supervisor starts without gRPC. It links
  // glibc shared, and so also supervises a job whose groups it must look
  // up (NSS): one an earlier release queued, whose record names none.
  const bool multi_node = !job.spec.nodes.rdzv.empty();
  const bool looks_up_groups =
      !job.spec.groups && (job.spec.uid != geteuid() || job.spec.gid != getegid());
  const bool etcd_build = multi_node || looks_up_groups;
  std::optional<SpawnedShim> shim;
  if (!etcd_build) shim = spares_.Take(job.id);
  if (!shim) {
    auto spawned = SpawnShim(config_, store_.state_dir(), job.id, nullptr, etcd_build);
    if (!spawned.ok()) return fail(std::string(spawned.status().message()));
    shim = std::move(*spawned);
  }
  spares_.Prepare(kNextSpareDelay);
  spdlog::debug("job={} supervisor pid {}", job.id, shim->pid);
  auto channel = FramedShimChannel::Open(loop_, std::move(shim->channel),
                                         store_.JobDir(job.id) + "/supervisor.sock");
  return Watch(job.id, shim->pid, std::move(shim->pidfd), std::move(channel), events,
               /*from_start=*/true);
}

std::unique_ptr<Supervision> ShimSupervisorHost::Adopt(const Job& job, Found found,
                                                       SupervisionEvents& events) {
  spdlog::info("job={} adopted its supervisor, pid {} (release {})", job.id, found.pid,
               found.release);
  const std::string dir = store_.JobDir(job.id);
  std::unique_ptr<ShimChannel> channel =
      found.framed.valid()
          ? FramedShimChannel::Open(loop_, std::move(found.framed), dir + "/supervisor.sock")
          : std::make_unique<GrpcShimChannel>(loop_, std::move(found.grpc_channel),
                                              dir + "/shim.sock");
  return Watch(job.id, found.pid, std::move(found.pidfd), std::move(channel), events,
               /*from_start=*/false);
}

}  // namespace ltd
