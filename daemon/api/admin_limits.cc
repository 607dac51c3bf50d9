#include "admin_limits.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "fd.h"
#include "limits_conf.h"
#include "spdlog/spdlog.h"

namespace ltd {
namespace {

// The user as pam_limits sees them: name, primary group, every group.
LimitsUser Who(uid_t uid, gid_t gid) {
  LimitsUser who;
  who.uid = uid;
  who.gid = gid;
  who.name = std::to_string(uid);
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    who.name = pw.pw_name;
    who.gid = pw.pw_gid;
  }
  int n = 1024;
  std::vector<gid_t> gids(static_cast<size_t>(n));
  if (getgrouplist(who.name.c_str(), who.gid, gids.data(), &n) >= 0) {
    gids.resize(static_cast<size_t>(n));
  } else {
    gids = {who.gid};  // more than 1024 groups, or none known: the primary one
  }
  who.gids = gids;
  for (gid_t g : gids) {
    group gr{};
    group* got = nullptr;
    if (getgrgid_r(g, &gr, buf.data(), buf.size(), &got) == 0 && got != nullptr) {
      who.groups.emplace_back(gr.gr_name);
    }
  }
  return who;
}

// The file's bytes if it is one the admin alone could have written; nullopt
// (and a log line) otherwise, or when it is not there.
std::optional<std::string> ReadAdminFile(const std::string& path) {
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd.valid()) {
    if (errno != ENOENT) spdlog::warn("limits: open({}): {}", path, std::strerror(errno));
    return std::nullopt;
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    spdlog::warn("limits: {} is not a regular file; skipped", path);
    return std::nullopt;
  }
  if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    spdlog::warn("limits: {} may be written by others than root; skipped (chown root, chmod go-w)",
                 path);
    return std::nullopt;
  }
  std::string bytes;
  char chunk[65536];
  while (bytes.size() < LimitsConf::kMaxBytes) {
    const ssize_t got = read(fd.get(), chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    bytes.append(chunk, static_cast<size_t>(got));
  }
  if (bytes.size() > LimitsConf::kMaxBytes) bytes.resize(LimitsConf::kMaxBytes);
  return bytes;
}

// limits.d's *.conf, in the C locale's order (pam_limits' glob order).
std::vector<std::string> DropIns(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || name[0] == '.' || name.size() < 6 || !name.ends_with(".conf")) continue;
    names.push_back(name);
    if (names.size() > kMaxLimitsFiles) break;
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  if (names.size() > kMaxLimitsFiles) {
    spdlog::warn("limits: more than {} files in {}; the first {} are read", kMaxLimitsFiles, dir,
                 kMaxLimitsFiles);
    names.resize(kMaxLimitsFiles);
  }
  return names;
}

}  // namespace

std::vector<ResourceLimit> AdminLimits(uid_t uid, gid_t gid, const std::string& dir,
                                       const std::vector<ResourceLimit>& start) {
  // The user's name and groups from NSS only when a line may name them.
  LimitsConf conf([uid, gid] { return Who(uid, gid); }, start);
  std::vector<std::string> files = {dir + "/limits.conf"};
  for (const std::string& name : DropIns(dir + "/limits.d")) {
    files.push_back(dir + "/limits.d/" + name);
  }
  for (const std::string& path : files) {
    if (auto bytes = ReadAdminFile(path)) {
      if (const size_t skipped = conf.Apply(*bytes); skipped > 0) {
        spdlog::debug("limits: {}: {} lines skipped (not a limit line)", path, skipped);
      }
    }
  }
  std::vector<ResourceLimit> out = conf.Result();
  // Never above ltd's own hard limits: lt-exec sets them as the user.
  for (ResourceLimit& l : out) {
    for (const ResourceLimit& s : start) {
      if (s.resource == l.resource) l.hard = std::min(l.hard, s.hard);
    }
    l.soft = std::min(l.soft, l.hard);
  }
  return out;
}

}  // namespace ltd
