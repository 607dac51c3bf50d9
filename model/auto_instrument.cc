#include "auto_instrument.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ltd {
namespace {

bool HasKey(const std::string& kv, std::string_view key) {
  return kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=';
}

std::string Problem(const std::string& path, const struct stat& st) {
  if (st.st_uid != 0) return path + " is not owned by root";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !(S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX)))
    return path + " is writable by others than root";
  return "";
}

// Every entry of `dir` (not recursive: the module directories are flat).
std::string EntriesProblem(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return "cannot list " + dir + ": " + std::strerror(errno);
  std::string problem;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    const std::string path = dir + "/" + name;
    if (lstat(path.c_str(), &st) != 0) continue;
    problem = Problem(path, st);
    if (!problem.empty()) break;
  }
  closedir(d);
  return problem;
}

}  // namespace

std::chrono::milliseconds AutoCheckInterval(std::chrono::milliseconds timeout) {
  return std::clamp(timeout / 10, std::chrono::milliseconds(20), std::chrono::milliseconds(1000));
}

void RequestAutoHeartbeat(std::vector<std::string>& env, const std::string& dir,
                          std::chrono::milliseconds timeout) {
  std::erase_if(env, [](const std::string& kv) {
    return HasKey(kv, kAutoHeartbeatVar) || HasKey(kv, kAutoHeartbeatDirVar);
  });
  if (dir.empty()) return;
  env.push_back(std::string(kAutoHeartbeatDirVar) + "=" + dir);
  env.push_back(std::string(kAutoHeartbeatVar) + "=" +
                std::to_string(AutoCheckInterval(timeout).count()));
}

bool HasAutoHeartbeatRequest(const std::vector<std::string>& env) {
  return std::any_of(env.begin(), env.end(),
                     [](const std::string& kv) { return HasKey(kv, kAutoHeartbeatDirVar); });
}

std::vector<std::string> ApplyAutoHeartbeat(const std::vector<std::string>& env,
                                            bool may_run_python) {
  std::string dir;
  for (const std::string& kv : env) {
    if (HasKey(kv, kAutoHeartbeatDirVar)) dir = kv.substr(kAutoHeartbeatDirVar.size() + 1);
  }
  const bool inject = may_run_python && !dir.empty();
  std::vector<std::string> out;
  out.reserve(env.size() + 1);
  bool had_pythonpath = false;
  for (const std::string& kv : env) {
    if (HasKey(kv, kAutoHeartbeatDirVar)) continue;
    if (HasKey(kv, kAutoHeartbeatVar) && !inject) continue;
    if (inject && HasKey(kv, "PYTHONPATH")) {
      had_pythonpath = true;
      const std::string rest = kv.substr(11);
      // An empty PYTHONPATH adds nothing; "dir:" would add the cwd.
      out.push_back("PYTHONPATH=" + dir + (rest.empty() ? "" : ":" + rest));
      continue;
    }
    out.push_back(kv);
  }
  if (inject && !had_pythonpath) out.push_back("PYTHONPATH=" + dir);
  return out;
}

std::string AutoHeartbeatDirProblem(const std::string& dir) {
  struct stat st {};
  const std::string module = dir + "/sitecustomize.py";
  if (dir.empty() || dir.front() != '/') return "'" + dir + "' is not an absolute path";
  if (stat(module.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return module + " is missing";
  if (geteuid() != 0) return "";  // one user: nobody else's ranks to reach
  // The directory and every one above it, the module's files, and the
  // ltworker package beside it (the module loads its writer from there).
  std::string path = dir;
  while (!path.empty()) {
    if (stat(path.c_str(), &st) != 0) return "cannot stat " + path + ": " + std::strerror(errno);
    if (std::string p = Problem(path, st); !p.empty()) return p;
    const size_t slash = path.rfind('/');
    path = slash == 0 ? (path == "/" ? "" : "/") : path.substr(0, slash);
  }
  const std::string parent = dir.substr(0, dir.rfind('/'));
  for (const std::string& d : {dir, parent + "/ltworker"}) {
    if (std::string p = EntriesProblem(d); !p.empty()) return p;
  }
  return "";
}

}  // namespace ltd
