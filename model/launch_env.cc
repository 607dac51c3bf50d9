#include "launch_env.h"

#include <algorithm>

#include "duration.h"
#include "str_util.h"

namespace ltd {
namespace {

bool HasEnv(const std::vector<std::string>& env, std::string_view key) {
  for (const std::string& kv : env) {
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=') {
      return true;
    }
  }
  return false;
}

}  // namespace

std::vector<std::string> RankEnvironment(const Job& job, int rank, const std::string& job_dir,
                                         const std::vector<std::string>& extra) {
  // torchrun's numbering: node R's local rank L is global rank R * devices + L.
  const NodeSpec& nodes = job.spec.nodes;
  const int node = std::max(0, NodeRankOf(nodes));
  const int local_world = job.spec.devices;
  const std::string local = std::to_string(rank);
  const std::string global = std::to_string(node * local_world + rank);
  const std::string world = std::to_string(nodes.nnodes * local_world);
  std::vector<std::pair<std::string, std::string>> vars = {
      {"RANK", global},
      {"LOCAL_RANK", local},
      {"WORLD_SIZE", world},
      {"LOCAL_WORLD_SIZE", std::to_string(local_world)},
      {"GROUP_RANK", std::to_string(node)},
      {"NODE_RANK", std::to_string(node)},
      {"ROLE_RANK", global},
      {"ROLE_WORLD_SIZE", world},
      {"GROUP_WORLD_SIZE", std::to_string(nodes.nnodes)},
      {"ROLE_NAME", "default"},
      {"MASTER_ADDR", nodes.master_addr.empty() ? "127.0.0.1" : nodes.master_addr},
      {"MASTER_PORT", std::to_string(job.master_port)},
      {"TORCHELASTIC_RUN_ID", nodes.run_id.empty() ? job.id : nodes.run_id},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(job.restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(job.spec.max_restarts)},
      {"TORCHELASTIC_ERROR_FILE", Cat(job_dir, "/errors/error-", local, ".json")},
      {"PYTHONFAULTHANDLER", "1"},
      {"LT_JOB_ID", job.id},
      {"LT_HEARTBEAT_FD", "3"},
      {"LT_STACK_FD", "5"},
  };
  if (job.spec.heartbeat_timeout.count() > 0) {
    vars.emplace_back("LT_HEARTBEAT_TIMEOUT", FormatDuration(job.spec.heartbeat_timeout));
  }
  // An array's task, under ltd's own names: SLURM_ARRAY_* would make
  // Lightning and other libraries take the job for a Slurm one.
  if (const ArrayTask& a = job.spec.array; !a.job_id.empty()) {
    vars.emplace_back("LTD_ARRAY_JOB_ID", a.job_id);
    vars.emplace_back("LTD_ARRAY_TASK_ID", std::to_string(a.task));
    vars.emplace_back("LTD_ARRAY_TASK_COUNT", std::to_string(a.count));
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
  // torch >= 2.4's env:// rendezvous asks for the libuv TCPStore unless
  // USE_LIBUV=0, and a torch built without libuv (Debian 13's 2.6) then
  // fails init_process_group. The other TCPStore works in every torch, so
  // it is the default; a user who sets USE_LIBUV keeps theirs.
  if (!HasEnv(job.spec.env, "USE_LIBUV")) env.push_back("USE_LIBUV=0");
  for (const auto& [k, v] : vars) env.push_back(Cat(k, "=", v));
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

}  // namespace ltd
