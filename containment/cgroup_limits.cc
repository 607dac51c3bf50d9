#include "cgroup_limits.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "cgroup_fs.h"
#include "file_io.h"
#include "gpu_devices.h"
#include "posix_error.h"
#include "str_util.h"

namespace ltd {
namespace {

constexpr uint64_t kCpuPeriodUs = 100000;

bool Names(std::string_view list, std::string_view controller) {
  for (std::string_view c : NonEmptyFields(list, ',')) {
    if (c == controller) return true;
  }
  return false;
}

// The number after `key ` in a flat-keyed cgroup file ("oom_kill 3\n").
std::optional<uint64_t> KeyedValue(std::string_view text, std::string_view key) {
  for (std::string_view line : NonEmptyFields(text, '\n')) {
    if (line.size() <= key.size() + 1 || !line.starts_with(key) || line[key.size()] != ' ') {
      continue;
    }
    const std::string value(line.substr(key.size() + 1));
    char* end = nullptr;
    const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
    if (end == value.c_str()) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<V1Mount> ParseV1Mount(std::string_view mountinfo, std::string_view controller) {
  for (std::string_view line : NonEmptyFields(mountinfo, '\n')) {
    const std::vector<std::string_view> f = NonEmptyFields(line, ' ');
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (f.size() < 5 || dash + 3 >= f.size() || f[dash + 1] != "cgroup") continue;
    if (!Names(f[dash + 3], controller)) continue;
    return V1Mount{UnescapeMountinfo(f[4]), UnescapeMountinfo(f[3])};
  }
  return absl::NotFoundError(
      Cat("no cgroup v1 hierarchy of the ", controller, " controller is mounted"));
}

absl::StatusOr<std::string> ParseV1Cgroup(std::string_view proc_cgroup,
                                          std::string_view controller) {
  for (std::string_view line : NonEmptyFields(proc_cgroup, '\n')) {
    const size_t first = line.find(':');
    const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    if (Names(line.substr(first + 1, second - first - 1), controller)) {
      return std::string(line.substr(second + 1));
    }
  }
  return absl::NotFoundError(Cat("this process is in no cgroup of the ", controller,
                                 " controller's v1 hierarchy (/proc/self/cgroup)"));
}

ControllerPlace FindController(std::string_view controller, const std::string& v2_own_dir,
                               std::string_view mountinfo, std::string_view proc_cgroup) {
  ControllerPlace place;
  if (!v2_own_dir.empty()) {
    auto available = ReadWholeFile(v2_own_dir + "/cgroup.controllers", 4096);
    if (available.ok()) {
      std::string list(*available);
      for (char& c : list) {
        if (c == ' ' || c == '\n') c = ',';
      }
      if (Names(list, controller)) {
        place.layout = CgroupLayout::kV2;
        place.own_dir = v2_own_dir;
        return place;
      }
    }
  }
  auto mount = ParseV1Mount(mountinfo, controller);
  auto path = mount.ok() ? ParseV1Cgroup(proc_cgroup, controller) : mount.status();
  if (!path.ok()) {
    place.why = absl::FailedPreconditionError(
        Cat("the cgroup ", controller, " controller is not available: neither ltd's cgroup2 ",
            v2_own_dir.empty() ? std::string("hierarchy (none)") : v2_own_dir,
            " has it (cgroup.controllers) nor is there a v1 hierarchy of it (",
            path.status().message(), ")"));
    return place;
  }
  std::string rel = *path;
  if (mount->root != "/") {
    if (!rel.starts_with(mount->root)) {
      place.why = absl::FailedPreconditionError(
          Cat("the cgroup ", controller, " controller is not available: this process's cgroup ",
              rel, " is outside the v1 mount ", mount->mount_point));
      return place;
    }
    rel = rel.substr(mount->root.size());
  }
  while (!rel.empty() && rel.back() == '/') rel.pop_back();
  place.layout = CgroupLayout::kV1;
  place.own_dir = mount->mount_point + rel;
  return place;
}

LimitPlaces FindLimitPlaces(const std::string& v2_own_dir, std::string_view mountinfo,
                            std::string_view proc_cgroup,
                            const std::string& device_program_proven) {
  return LimitPlaces{FindController("memory", v2_own_dir, mountinfo, proc_cgroup),
                     FindController("cpu", v2_own_dir, mountinfo, proc_cgroup),
                     FindDevicePlace(v2_own_dir, mountinfo, proc_cgroup, device_program_proven)};
}

absl::Status EnableV2Controller(const std::string& top, const std::string& bottom,
                                std::string_view controller) {
  if (bottom != top && !bottom.starts_with(top + "/")) {
    return absl::InvalidArgumentError(Cat(bottom, " is not below ", top));
  }
  std::vector<std::string> dirs = {top};
  for (std::string_view part : NonEmptyFields(std::string_view(bottom).substr(top.size()), '/')) {
    dirs.push_back(Cat(dirs.back(), "/", part));
  }
  for (const std::string& dir : dirs) {
    const std::string file = dir + "/cgroup.subtree_control";
    auto now = ReadWholeFile(file, 4096);
    if (!now.ok()) return now.status();
    std::string list(*now);
    for (char& c : list) {
      if (c == ' ' || c == '\n') c = ',';
    }
    if (Names(list, controller)) continue;
    if (absl::Status s = WriteWholeFile(file, Cat("+", controller)); !s.ok()) {
      return absl::FailedPreconditionError(
          Cat("cannot enable the cgroup ", controller, " controller for ltd's jobs: ", s.message(),
              dir == top ? "; ltd's own cgroup holds processes, so it may pass no controller "
                           "down: start ltd in a cgroup of its own (systemd: Delegate=yes)"
                         : ""));
    }
  }
  return absl::OkStatus();
}

absl::Status SetMemoryLimit(CgroupLayout layout, const std::string& dir, uint64_t bytes) {
  const std::string value = std::to_string(bytes);
  if (layout == CgroupLayout::kV2) {
    if (absl::Status s = WriteWholeFile(dir + "/memory.max", value); !s.ok()) return s;
    // Only where the kernel accounts swap; the limit is the memory's.
    const std::string swap = dir + "/memory.swap.max";
    if (access(swap.c_str(), F_OK) == 0) return WriteWholeFile(swap, "0");
    return absl::OkStatus();
  }
  if (layout != CgroupLayout::kV1) return absl::FailedPreconditionError("no memory controller");
  if (absl::Status s = WriteWholeFile(dir + "/memory.limit_in_bytes", value); !s.ok()) return s;
  // Memory plus swap no more than memory: the limit means memory, as
  // Slurm's AllowedSwapSpace=0. Set after memory.limit_in_bytes, which it
  // may not be below.
  const std::string memsw = dir + "/memory.memsw.limit_in_bytes";
  if (access(memsw.c_str(), F_OK) == 0) return WriteWholeFile(memsw, value);
  return absl::OkStatus();
}

absl::Status SetCpuLimit(CgroupLayout layout, const std::string& dir, uint32_t millis) {
  const uint64_t quota = uint64_t{millis} * kCpuPeriodUs / 1000;
  if (layout == CgroupLayout::kV2) {
    return WriteWholeFile(dir + "/cpu.max", Cat(quota, " ", kCpuPeriodUs));
  }
  if (layout != CgroupLayout::kV1) return absl::FailedPreconditionError("no cpu controller");
  if (absl::Status s = WriteWholeFile(dir + "/cpu.cfs_period_us", std::to_string(kCpuPeriodUs));
      !s.ok()) {
    return s;
  }
  return WriteWholeFile(dir + "/cpu.cfs_quota_us", std::to_string(quota));
}

std::optional<uint64_t> ReadOomKills(CgroupLayout layout, const std::string& dir) {
  if (layout == CgroupLayout::kNone) return std::nullopt;
  auto text = ReadWholeFile(
      dir + (layout == CgroupLayout::kV2 ? "/memory.events" : "/memory.oom_control"), 4096);
  if (!text.ok()) return std::nullopt;
  return KeyedValue(*text, "oom_kill");
}

absl::Status MakeCgroupDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return PosixError("mkdir", dir, errno);
  return absl::OkStatus();
}

}  // namespace ltd
