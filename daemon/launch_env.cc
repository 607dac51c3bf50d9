#include "launch_env.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "duration.h"
#include "str_util.h"

namespace ltd {
namespace {

std::string EnvValue(const std::vector<std::string>& env, std::string_view key) {
  for (const std::string& kv : env) {
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=') {
      return kv.substr(key.size() + 1);
    }
  }
  return "";
}

bool HasEnv(const std::vector<std::string>& env, std::string_view key) {
  for (const std::string& kv : env) {
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=') {
      return true;
    }
  }
  return false;
}

// Whether `uid`/`gid` may execute the file: the kernel's check, done ahead of
// time so a job that cannot start fails before any rank runs.
int CheckExecutable(const std::string& path, uid_t uid, gid_t gid) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return errno;
  if (S_ISDIR(st.st_mode)) return EISDIR;
  if (!S_ISREG(st.st_mode)) return EACCES;
  mode_t bit;
  if (uid == 0) {
    bit = S_IXUSR | S_IXGRP | S_IXOTH;
  } else if (st.st_uid == uid) {
    bit = S_IXUSR;
  } else if (st.st_gid == gid) {
    bit = S_IXGRP;
  } else {
    bit = S_IXOTH;
  }
  return (st.st_mode & bit) != 0 ? 0 : EACCES;
}

}  // namespace

absl::StatusOr<std::string> ResolveProgram(const JobSpec& spec) {
  const std::string& program = spec.argv.front();
  std::vector<std::string> candidates;
  if (program.find('/') != std::string::npos) {
    candidates.push_back(program.front() == '/' ? program : spec.cwd + "/" + program);
  } else {
    std::string path = EnvValue(spec.env, "PATH");
    if (path.empty()) path = "/usr/local/bin:/usr/bin:/bin";
    for (std::string_view dir : Split(path, ':')) {
      if (dir.empty()) dir = ".";
      std::string full = Cat(dir, "/", program);
      if (full.front() != '/') full = spec.cwd + "/" + full;
      candidates.push_back(std::move(full));
    }
  }
  int first_error = ENOENT;
  for (const std::string& path : candidates) {
    const int err = CheckExecutable(path, spec.uid, spec.gid);
    if (err == 0) return path;
    if (err != ENOENT && first_error == ENOENT) first_error = err;
  }
  return absl::Status(absl::StatusCode::kNotFound,
                      Cat("cannot execute ", program, ": ", std::strerror(first_error)));
}

std::vector<std::string> RankEnvironment(const Job& job, int rank, const std::string& job_dir,
                                         const std::vector<std::string>& extra) {
  const std::string n = std::to_string(job.spec.devices);
  const std::string r = std::to_string(rank);
  std::vector<std::pair<std::string, std::string>> vars = {
      {"RANK", r},
      {"LOCAL_RANK", r},
      {"WORLD_SIZE", n},
      {"LOCAL_WORLD_SIZE", n},
      {"GROUP_RANK", "0"},
      {"NODE_RANK", "0"},
      {"ROLE_RANK", r},
      {"ROLE_WORLD_SIZE", n},
      {"GROUP_WORLD_SIZE", "1"},
      {"ROLE_NAME", "default"},
      {"MASTER_ADDR", "127.0.0.1"},
      {"MASTER_PORT", std::to_string(job.master_port)},
      {"TORCHELASTIC_RUN_ID", job.id},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(job.restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(job.spec.max_restarts)},
      {"TORCHELASTIC_ERROR_FILE", Cat(job_dir, "/error-", r, ".json")},
      {"PYTHONFAULTHANDLER", "1"},
      {"LT_JOB_ID", job.id},
      {"LT_HEARTBEAT_FD", "3"},
  };
  if (job.spec.heartbeat_timeout.count() > 0) {
    vars.emplace_back("LT_HEARTBEAT_TIMEOUT", FormatDuration(job.spec.heartbeat_timeout));
  }
  if (!job.cuda_visible_devices.empty())
    vars.emplace_back("CUDA_VISIBLE_DEVICES", job.cuda_visible_devices);
  std::vector<std::string> env;
  env.reserve(job.spec.env.size() + vars.size() + 1);
  auto overridden = [&](const std::string& kv) {
    for (const auto& [k, v] : vars) {
      if (kv.size() > k.size() && kv.compare(0, k.size(), k) == 0 && kv[k.size()] == '=')
        return true;
    }
    return false;
  };
  for (const std::string& kv : job.spec.env) {
    if (!overridden(kv)) env.push_back(kv);
  }
  if (!HasEnv(job.spec.env, "OMP_NUM_THREADS")) env.push_back("OMP_NUM_THREADS=1");
  for (const auto& [k, v] : vars) env.push_back(Cat(k, "=", v));
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

}  // namespace ltd
