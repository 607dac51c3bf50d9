// cgroup v2 through its filesystem: where the hierarchy is mounted, which
// cgroup a process is in, and the few files ltd reads and writes there.
// Plain syscalls, no libuv, so lt-guardian links it as well as ltd.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "file_io.h"
#include "mountinfo.h"
#include "posix_error.h"

namespace ltd {

// Where the cgroup2 hierarchy is mounted, and which of its cgroups the
// mount shows at that point ("/" unless a subtree was bind-mounted).
struct Cgroup2Mount {
  std::string root;
  std::string mount_point;
};
// The first cgroup2 mount in /proc/PID/mountinfo text; NotFound when there
// is none (a cgroup v1-only host).
absl::StatusOr<Cgroup2Mount> ParseCgroup2Mount(std::string_view mountinfo);
// The cgroup v2 path ("/a/b") in /proc/PID/cgroup text: its "0::" line.
absl::StatusOr<std::string> ParseUnifiedCgroup(std::string_view proc_cgroup);
// The directory of this process's own cgroup: the mount point plus its
// own path below the mount's root. From this process's mountinfo and
// cgroup as read (the caller that needs them again reads them once), or
// read here.
absl::StatusOr<std::string> OwnCgroupDir(std::string_view mountinfo, std::string_view proc_cgroup);
absl::StatusOr<std::string> OwnCgroupDir();

// Whether anything lives in the cgroup or below (`populated` of
// cgroup.events). NotFound when the cgroup is gone.
absl::StatusOr<bool> CgroupPopulated(const std::string& dir);

// The CPU time the cgroup's processes used, theirs and every cgroup's
// below, living and gone (`usage_usec` of cpu.stat, which every cgroup v2
// has with or without the cpu controller). nullopt without one.
std::optional<std::chrono::microseconds> ParseCpuStatUsage(std::string_view cpu_stat);
std::optional<std::chrono::microseconds> CgroupCpuUsage(const std::string& dir);

// SIGKILLs every process in the cgroup and below: cgroup.kill where the
// kernel has it (>= 5.14), else KillCgroupByFreezing. Returns at once; the
// processes are gone when CgroupPopulated turns false. NotFound when the
// cgroup is gone.
absl::Status KillCgroup(const std::string& dir);
// The pre-5.14 way: freeze the subtree so nothing can fork, SIGKILL every
// pid in every cgroup.procs of it, thaw so the killed ones can exit.
absl::Status KillCgroupByFreezing(const std::string& dir);

// Child cgroups of `dir` (directory names only).
std::vector<std::string> ChildCgroups(const std::string& dir);
// Pids in `dir`/cgroup.procs (not below).
std::vector<pid_t> CgroupProcs(const std::string& dir);
// How many processes live in `dir` and every cgroup below it.
int CountCgroupProcs(const std::string& dir);

// rmdir of `dir` and every cgroup below it, deepest first; a cgroup
// already gone is fine. Fails (EBUSY) while a process lives in one.
absl::Status RemoveCgroupTree(const std::string& dir);

}  // namespace ltd
