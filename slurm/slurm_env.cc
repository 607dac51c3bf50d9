#include "slurm_env.h"

#include <charconv>
#include <cstdlib>

#include "bytes.h"
#include "hostlist.h"
#include "str_util.h"

namespace ltd {
namespace {

constexpr int kMaxNodes = 65536;

absl::StatusOr<uint64_t> Unsigned(const EnvLookup& env, std::string_view name, uint64_t max) {
  const std::optional<std::string> value = env(name);
  if (!value) return absl::NotFoundError(Cat(name, " is not set"));
  uint64_t n = 0;
  const char* end = value->data() + value->size();
  const auto [ptr, ec] = std::from_chars(value->data(), end, n);
  if (value->empty() || ec != std::errc() || ptr != end || n > max) {
    return absl::InvalidArgumentError(
        Cat("Slurm's ", name, "='", DisplayEscapeElided(*value, 40, Controls::kEscape),
            "' is not a number up to ", max, "; is this a Slurm job step?"));
  }
  return n;
}

// The first variable of `names` that is set.
std::optional<std::string_view> FirstSet(const EnvLookup& env,
                                         std::initializer_list<std::string_view> names) {
  for (std::string_view name : names) {
    if (env(name)) return name;
  }
  return std::nullopt;
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

int SlurmMasterPort(uint64_t job_id, uint64_t step_id) {
  return 20000 + static_cast<int>(job_id % 1000) * 10 + static_cast<int>(step_id % 10);
}

absl::StatusOr<std::optional<NodeSpec>> NodesFromSlurm(const EnvLookup& env) {
  if (!env("SLURM_JOB_ID")) return std::nullopt;
  auto job_id = Unsigned(env, "SLURM_JOB_ID", UINT32_MAX);
  if (!job_id.ok()) return job_id.status();
  const bool in_step = env("SLURM_STEP_ID").has_value();
  std::optional<uint64_t> step_id;
  if (in_step) {
    auto step = Unsigned(env, "SLURM_STEP_ID", UINT32_MAX);
    if (!step.ok()) return step.status();
    step_id = *step;
  }
  const auto nnodes_var =
      FirstSet(env, {"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"});
  if (!nnodes_var) {
    return absl::InvalidArgumentError(
        "SLURM_JOB_ID is set but not SLURM_NNODES; run ltrun in a job step (srun), or pass "
        "--no-slurm");
  }
  auto nnodes = Unsigned(env, *nnodes_var, kMaxNodes);
  if (!nnodes.ok()) return nnodes.status();
  if (*nnodes < 1) return absl::InvalidArgumentError(Cat("Slurm's ", *nnodes_var, " is 0"));
  const std::string recipe =
      Cat("start one ltrun per node: srun -N", *nnodes,
          " --ntasks-per-node=1 ltrun --devices N -- PROGRAM (or pass --no-slurm to run on this "
          "node alone)");
  if (!in_step && *nnodes > 1) {
    return absl::InvalidArgumentError(
        Cat("ltrun runs outside a job step of a ", *nnodes, "-node Slurm job; ", recipe));
  }
  const auto tasks_var = FirstSet(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"});
  if (in_step && tasks_var) {
    auto tasks = Unsigned(env, *tasks_var, UINT32_MAX);
    if (!tasks.ok()) return tasks.status();
    if (*tasks != *nnodes) {
      return absl::InvalidArgumentError(Cat("this Slurm step runs ", *tasks, " tasks on ", *nnodes,
                                            " nodes, but ltrun starts the ranks itself; ", recipe));
    }
  }
  uint64_t node_id = 0;
  if (env("SLURM_NODEID")) {
    auto id = Unsigned(env, "SLURM_NODEID", kMaxNodes);
    if (!id.ok()) return id.status();
    node_id = *id;
  }
  if (node_id >= *nnodes) {
    return absl::InvalidArgumentError(
        Cat("Slurm's SLURM_NODEID ", node_id, " is not below ", *nnodes_var, "=", *nnodes));
  }
  NodeSpec nodes;
  nodes.nnodes = static_cast<int>(*nnodes);
  nodes.node_rank = static_cast<int>(node_id);
  nodes.master_port = SlurmMasterPort(*job_id, step_id.value_or(0));
  nodes.run_id = step_id ? Cat("slurm-", *job_id, ".", *step_id) : Cat("slurm-", *job_id);
  const auto list_var =
      FirstSet(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (!list_var) {
    if (*nnodes > 1) {
      return absl::InvalidArgumentError(
          "Slurm set no SLURM_STEP_NODELIST or SLURM_JOB_NODELIST; pass --master-addr");
    }
    return nodes;
  }
  const std::string list = *env(*list_var);
  auto count = CountHosts(list);
  if (!count.ok())
    return absl::InvalidArgumentError(Cat(*list_var, ": ", count.status().message()));
  if (*count != *nnodes) {
    return absl::InvalidArgumentError(Cat("Slurm's ", *list_var, " names ", *count, " hosts, but ",
                                          *nnodes_var, " is ", *nnodes));
  }
  auto first = FirstHost(list);
  if (!first.ok()) return first.status();
  nodes.master_addr = *first;
  return nodes;
}

}  // namespace ltd
