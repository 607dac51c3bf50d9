// Where a job's memory and CPU limits can be set on this host, and the
// few files that set and read them, in both cgroup layouts (as Slurm's
// cgroup/v1 and cgroup/v2 plugins do):
//
//   unified (v2)  the controller is in the cgroup2 hierarchy ltd's jobs
//                 live in: it is enabled down to the job's cgroup
//                 (cgroup.subtree_control), which gets memory.max, cpu.max;
//                 OOM kills are counted in memory.events.
//   hybrid (v1)   the controller has a v1 hierarchy of its own
//                 (/sys/fs/cgroup/memory, ...): the job gets a cgroup there
//                 too, <own v1 cgroup>/ltd-<tag>/run-<instance>/job-<id>,
//                 that lt-exec joins before the program runs; it gets
//                 memory.limit_in_bytes, cpu.cfs_quota_us; OOM kills are
//                 counted in memory.oom_control.
//
// Where neither has the controller, a limit cannot be set and a job that
// asks for one is refused; never run unlimited. Plain syscalls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ltd {

enum class CgroupLayout { kNone, kV2, kV1 };

// A cgroup v1 hierarchy's mount point, and which of its cgroups the mount
// shows there ("/" unless a subtree was bind-mounted).
struct V1Mount {
  std::string mount_point;
  std::string root;
};
// The v1 hierarchy whose mount options name `controller` ("memory",
// "cpu"; not "cpuacct" for "cpu"); NotFound when none does.
absl::StatusOr<V1Mount> ParseV1Mount(std::string_view mountinfo, std::string_view controller);
// The path of a process's cgroup in that hierarchy: the line
// "N:cpu,cpuacct:/path" of /proc/PID/cgroup whose list names `controller`.
absl::StatusOr<std::string> ParseV1Cgroup(std::string_view proc_cgroup,
                                          std::string_view controller);

// Where one controller's limits go for this process's jobs.
struct ControllerPlace {
  CgroupLayout layout = CgroupLayout::kNone;
  // kV2: this process's own cgroup2 cgroup, where enabling begins. kV1:
  // its own cgroup in the controller's v1 hierarchy.
  std::string own_dir;
  absl::Status why;  // kNone: why the controller cannot be had
};

// `controller` in the cgroup2 hierarchy when `v2_own_dir`'s
// cgroup.controllers lists it, else in a v1 hierarchy of `mountinfo`
// (this process's cgroup there from `proc_cgroup`), else kNone with why.
ControllerPlace FindController(std::string_view controller, const std::string& v2_own_dir,
                               std::string_view mountinfo, std::string_view proc_cgroup);

struct LimitPlaces {
  ControllerPlace memory;
  ControllerPlace cpu;
  ControllerPlace devices;  // which GPUs a job may open (gpu_devices.h)
};
// All three, for this process, from its /proc/self/mountinfo and
// /proc/self/cgroup as read. `device_program_proven`: as FindDevicePlace's
// `proven`.
LimitPlaces FindLimitPlaces(const std::string& v2_own_dir, std::string_view mountinfo,
                            std::string_view proc_cgroup,
                            const std::string& device_program_proven = "");

// Writes "+controller" to cgroup.subtree_control of `top` and of every
// cgroup below it down to `bottom` (a descendant of `top`, or `top`), so
// that `bottom`'s children get the controller's files. Fails where a
// cgroup with processes of its own may not pass controllers down (EBUSY).
absl::Status EnableV2Controller(const std::string& top, const std::string& bottom,
                                std::string_view controller);

// The memory limit of the cgroup at `dir`: v2 memory.max (and no swap
// beyond it, where swap is accounted), v1 memory.limit_in_bytes (and
// memory.memsw.limit_in_bytes where there is one).
absl::Status SetMemoryLimit(CgroupLayout layout, const std::string& dir, uint64_t bytes);
// `millis` thousandths of a CPU per 100 ms: v2 cpu.max, v1
// cpu.cfs_period_us and cpu.cfs_quota_us.
absl::Status SetCpuLimit(CgroupLayout layout, const std::string& dir, uint32_t millis);
// How many processes of the cgroup and below the OOM killer killed: v2
// memory.events' oom_kill, v1 memory.oom_control's. nullopt when it
// cannot be read.
std::optional<uint64_t> ReadOomKills(CgroupLayout layout, const std::string& dir);

// mkdir of `dir`, existing is fine.
absl::Status MakeCgroupDir(const std::string& dir);

}  // namespace ltd
