#include "stale_runs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <ctime>

#include "cgroup_fs.h"
#include "file_io.h"
#include "process_scan.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

constexpr std::string_view kLtrunPrefix = "run-ltrun";
constexpr std::string_view kProbePrefix = "ltd-device-probe-";

// The pid after `prefix` in `name`; nullopt unless the rest is all digits.
std::optional<pid_t> PidAfter(std::string_view prefix, std::string_view name) {
  if (!name.starts_with(prefix)) return std::nullopt;
  const std::string_view digits = name.substr(prefix.size());
  pid_t pid = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || pid <= 0) {
    return std::nullopt;
  }
  return pid;
}

// Seconds since the epoch the system booted at (/proc/stat's btime).
std::optional<int64_t> BootTime() {
  auto text = ReadWholeFile("/proc/stat", 1 << 16);
  if (!text.ok()) return std::nullopt;
  const size_t at = text->find("\nbtime ");
  if (at == std::string::npos) return std::nullopt;
  int64_t v = 0;
  const char* begin = text->data() + at + 7;
  const auto [end, ec] = std::from_chars(begin, text->data() + text->size(), v);
  if (ec != std::errc()) return std::nullopt;
  return v;
}

// Whether the process that made `dir` (pid `pid`) still lives. It
// started before it made the cgroup; a process with its pid that started
// after the cgroup last changed (its ctime, plus a second for the clock
// ticks' grain) is another: the pid was reused. In doubt, it lives.
bool OwnerAlive(pid_t pid, const std::string& dir) {
  const std::optional<ProcEntry> p = ReadProcEntry(pid);
  if (!p) return false;
  struct stat st {};
  const std::optional<int64_t> boot = BootTime();
  const long ticks = sysconf(_SC_CLK_TCK);
  if (stat(dir.c_str(), &st) != 0 || !boot || ticks <= 0) return true;
  const int64_t started =
      *boot + static_cast<int64_t>(p->start_time / static_cast<uint64_t>(ticks));
  return started <= static_cast<int64_t>(st.st_ctim.tv_sec) + 1;
}

bool Empty(const std::string& dir) {
  auto populated = CgroupPopulated(dir);
  if (populated.ok()) return !*populated;
  // v1: no cgroup.events; its processes are counted.
  return absl::IsNotFound(populated.status()) && access(dir.c_str(), F_OK) == 0 &&
         CountCgroupProcs(dir) == 0;
}

}  // namespace

std::string LtrunInstance(pid_t pid) { return Cat("ltrun", pid); }

std::optional<pid_t> LtrunPidOf(std::string_view run_name) {
  return PidAfter(kLtrunPrefix, run_name);
}

std::string DeviceProbeName(pid_t pid) { return Cat(kProbePrefix, pid); }

int RemoveStaleDeviceProbes(const std::string& own_dir) {
  int removed = 0;
  for (const std::string& name : ChildCgroups(own_dir)) {
    const std::optional<pid_t> pid = PidAfter(kProbePrefix, name);
    if (!pid || *pid == getpid()) continue;
    const std::string dir = Cat(own_dir, "/", name);
    if (OwnerAlive(*pid, dir)) continue;
    // A probe holds no process and no child; rmdir fails on anything else.
    if (rmdir(dir.c_str()) != 0) {
      spdlog::warn("stale cgroup {} not removed: {}", dir, std::strerror(errno));
      continue;
    }
    spdlog::info("removed {}: the process that probed there (pid {}) is gone", dir, *pid);
    ++removed;
  }
  return removed;
}

int RemoveStaleLtrunCgroups(const std::vector<std::string>& own_dirs) {
  int removed = 0;
  for (const std::string& own : own_dirs) {
    for (const std::string& base : ChildCgroups(own)) {
      if (!base.starts_with("ltd-")) continue;
      const std::string base_dir = Cat(own, "/", base);
      bool any = false;
      for (const std::string& run : ChildCgroups(base_dir)) {
        const std::optional<pid_t> pid = LtrunPidOf(run);
        if (!pid || *pid == getpid()) continue;
        const std::string dir = Cat(base_dir, "/", run);
        if (OwnerAlive(*pid, dir) || !Empty(dir)) continue;
        // rmdir fails on a cgroup a process joined meanwhile: it stays.
        if (absl::Status s = RemoveCgroupTree(dir); !s.ok()) {
          spdlog::warn("stale cgroup {} not removed: {}", dir, std::string(s.message()));
          continue;
        }
        spdlog::info("removed {}: its ltrun (pid {}) is gone", dir, *pid);
        ++removed;
        any = true;
      }
      // Only if empty: another process on that state dir may use it.
      if (any) rmdir(base_dir.c_str());
    }
  }
  return removed;
}

}  // namespace ltd
