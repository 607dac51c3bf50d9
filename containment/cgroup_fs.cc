#include "cgroup_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include "fd.h"
#include "str_util.h"

namespace ltd {

namespace {

// Cgroups live on a pseudo filesystem, so a name in the tree is one path
// component; this keeps joins readable.
std::string Join2(const std::string& dir, std::string_view name) { return Cat(dir, "/", name); }

}  // namespace

absl::StatusOr<Cgroup2Mount> ParseCgroup2Mount(std::string_view mountinfo) {
  size_t start = 0;
  while (start < mountinfo.size()) {
    size_t end = mountinfo.find('\n', start);
    if (end == std::string_view::npos) end = mountinfo.size();
    const std::vector<std::string_view> f =
        NonEmptyFields(mountinfo.substr(start, end - start), ' ');
    start = end + 1;
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (f.size() < 5 || dash + 1 >= f.size() || f[dash + 1] != "cgroup2") continue;
    return Cgroup2Mount{UnescapeMountinfo(f[3]), UnescapeMountinfo(f[4])};
  }
  return absl::NotFoundError("no cgroup2 filesystem in /proc/self/mountinfo");
}

absl::StatusOr<std::string> ParseUnifiedCgroup(std::string_view proc_cgroup) {
  size_t start = 0;
  while (start < proc_cgroup.size()) {
    size_t end = proc_cgroup.find('\n', start);
    if (end == std::string_view::npos) end = proc_cgroup.size();
    const std::string_view line = proc_cgroup.substr(start, end - start);
    start = end + 1;
    if (line.starts_with("0::")) return std::string(line.substr(3));
  }
  return absl::NotFoundError("no cgroup v2 (\"0::\") line in /proc/self/cgroup");
}

absl::StatusOr<std::string> OwnCgroupDir() {
  auto mountinfo = ReadWholeFile("/proc/self/mountinfo");
  if (!mountinfo.ok()) return mountinfo.status();
  auto cgroup = ReadWholeFile("/proc/self/cgroup");
  if (!cgroup.ok()) return cgroup.status();
  return OwnCgroupDir(*mountinfo, *cgroup);
}

absl::StatusOr<std::string> OwnCgroupDir(std::string_view mountinfo, std::string_view proc_cgroup) {
  auto mount = ParseCgroup2Mount(mountinfo);
  if (!mount.ok()) return mount.status();
  auto own = ParseUnifiedCgroup(proc_cgroup);
  if (!own.ok()) return own.status();
  // A bind-mounted subtree shows cgroup ROOT at the mount point; our path
  // must lie below it or we cannot reach our own cgroup at all.
  std::string rel = *own;
  if (mount->root != "/") {
    if (!rel.starts_with(mount->root)) {
      return absl::FailedPreconditionError(Cat("own cgroup ", rel, " is outside the cgroup2 mount ",
                                               mount->mount_point, " (root ", mount->root, ")"));
    }
    rel = rel.substr(mount->root.size());
  }
  if (rel.ends_with(" (deleted)")) {
    return absl::FailedPreconditionError(Cat("own cgroup ", *own, " was removed"));
  }
  while (!rel.empty() && rel.back() == '/') rel.pop_back();
  return mount->mount_point + rel;
}

absl::StatusOr<bool> CgroupPopulated(const std::string& dir) {
  const std::string path = Join2(dir, "cgroup.events");
  auto text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  const size_t at = text->find("populated ");
  if (at == std::string::npos || at + 10 >= text->size()) {
    return absl::InternalError(Cat("read(", path, "): no populated field"));
  }
  return (*text)[at + 10] == '1';
}

std::optional<std::chrono::microseconds> ParseCpuStatUsage(std::string_view cpu_stat) {
  // "usage_usec N" on a line of its own, the first of the file today.
  constexpr std::string_view kKey = "usage_usec ";
  for (size_t at = 0; at < cpu_stat.size();) {
    size_t end = cpu_stat.find('\n', at);
    if (end == std::string_view::npos) end = cpu_stat.size();
    std::string_view line = cpu_stat.substr(at, end - at);
    at = end + 1;
    if (!line.starts_with(kKey)) continue;
    line.remove_prefix(kKey.size());
    uint64_t usec = 0;
    const auto [rest, ec] = std::from_chars(line.data(), line.data() + line.size(), usec);
    if (ec != std::errc() || rest != line.data() + line.size() ||
        usec > static_cast<uint64_t>(std::chrono::microseconds::max().count())) {
      return std::nullopt;
    }
    return std::chrono::microseconds(static_cast<int64_t>(usec));
  }
  return std::nullopt;
}

std::optional<std::chrono::microseconds> CgroupCpuUsage(const std::string& dir) {
  auto text = ReadWholeFile(Join2(dir, "cpu.stat"), 4096);
  if (!text.ok()) return std::nullopt;
  return ParseCpuStatUsage(*text);
}

absl::Status KillCgroup(const std::string& dir) {
  // cgroup.kill (Linux 5.14 on) at once: the one open every job's end
  // makes. Only where it is not there is the cgroup itself looked at.
  absl::Status killed = WriteWholeFile(Join2(dir, "cgroup.kill"), "1");
  if (!absl::IsNotFound(killed)) return killed;
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) return PosixError("stat", dir, errno);
  return KillCgroupByFreezing(dir);
}

namespace {

// Every cgroup of the subtree at `dir`, `dir` first.
void CollectTree(const std::string& dir, std::vector<std::string>& out) {
  out.push_back(dir);
  for (const std::string& child : ChildCgroups(dir)) CollectTree(Join2(dir, child), out);
}

bool Frozen(const std::string& dir) {
  auto text = ReadWholeFile(Join2(dir, "cgroup.events"));
  return text.ok() && text->find("frozen 1") != std::string::npos;
}

}  // namespace

absl::Status KillCgroupByFreezing(const std::string& dir) {
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) return PosixError("stat", dir, errno);
  const std::string freeze = Join2(dir, "cgroup.freeze");
  // Kernels before 5.2 have no cgroup v2 freezer; then kill in rounds
  // until a round finds nobody new, which forks can only delay.
  const absl::Status froze = WriteWholeFile(freeze, "1");
  if (froze.ok()) {
    // Freezing is asynchronous; a bounded wait, then kill regardless (a
    // task in uninterruptible sleep may never report frozen).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (!Frozen(dir) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  } else if (!absl::IsNotFound(froze)) {
    return froze;
  }
  absl::Status result = absl::OkStatus();
  std::set<pid_t> killed;
  for (int round = 0; round < 100 && result.ok(); ++round) {
    std::vector<std::string> tree;
    CollectTree(dir, tree);
    bool fresh = false;
    for (const std::string& cg : tree) {
      for (pid_t pid : CgroupProcs(cg)) {
        if (!killed.insert(pid).second) continue;
        fresh = true;
        if (kill(pid, SIGKILL) != 0 && errno != ESRCH) {
          result = PosixError("kill", Cat("pid ", pid, " in ", cg), errno);
        }
      }
    }
    if (!fresh) break;
  }
  // SIGKILLed tasks die even while frozen, but a cgroup left frozen would
  // freeze whatever joins it next.
  if (froze.ok()) {
    if (absl::Status s = WriteWholeFile(freeze, "0"); !s.ok() && result.ok()) result = s;
  }
  return result;
}

std::vector<std::string> ChildCgroups(const std::string& dir) {
  std::vector<std::string> children;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return children;
  while (dirent* e = readdir(d)) {
    if (e->d_type != DT_DIR) continue;
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    children.emplace_back(e->d_name);
  }
  closedir(d);
  return children;
}

std::vector<pid_t> CgroupProcs(const std::string& dir) {
  std::vector<pid_t> pids;
  auto text = ReadWholeFile(Join2(dir, "cgroup.procs"));
  if (!text.ok()) return pids;
  size_t start = 0;
  while (start < text->size()) {
    size_t end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    const long pid = std::strtol(text->c_str() + start, nullptr, 10);
    if (pid > 0) pids.push_back(static_cast<pid_t>(pid));
    start = end + 1;
  }
  return pids;
}

int CountCgroupProcs(const std::string& dir) {
  int n = static_cast<int>(CgroupProcs(dir).size());
  for (const std::string& child : ChildCgroups(dir)) n += CountCgroupProcs(Join2(dir, child));
  return n;
}

absl::Status RemoveCgroupTree(const std::string& dir) {
  // Most have no child cgroup left: the rmdir alone, and the listing (a
  // walk of every file the cgroup shows) only where the kernel says busy.
  if (rmdir(dir.c_str()) == 0 || errno == ENOENT) return absl::OkStatus();
  if (errno != EBUSY && errno != ENOTEMPTY) return PosixError("rmdir", dir, errno);
  for (const std::string& child : ChildCgroups(dir)) {
    if (absl::Status s = RemoveCgroupTree(Join2(dir, child)); !s.ok()) return s;
  }
  if (rmdir(dir.c_str()) != 0 && errno != ENOENT) return PosixError("rmdir", dir, errno);
  return absl::OkStatus();
}

}  // namespace ltd
