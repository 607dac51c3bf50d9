// A Slurm job step as a multi-node run: what `srun -N4 --ntasks-per-node=1
// ltrun --devices 8 -- python train.py` needs to know, read from the
// variables slurmstepd sets (SLURM_JOB_ID, SLURM_STEP_ID, SLURM_NNODES or
// SLURM_STEP_NUM_NODES, SLURM_NODEID, SLURM_STEP_NODELIST or
// SLURM_JOB_NODELIST, SLURM_NTASKS or SLURM_STEP_NUM_TASKS). Pure: the
// environment comes in as a lookup.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "job.h"

namespace ltd {

// A variable's value, or nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(std::string_view)>;
EnvLookup ProcessEnv();

// The run's master port, from the job and step ids, so that every node
// agrees on it without talking: 20000 + (job id % 1000) * 10 + step % 10,
// inside 20000..29999, below Linux's ephemeral ports (32768 and up).
int SlurmMasterPort(uint64_t job_id, uint64_t step_id);

// The nodes of the job step this process runs in: nnodes, node_rank,
// master_addr (the step's first host), master_port (SlurmMasterPort) and
// run_id ("slurm-JOB.STEP"). nullopt outside Slurm (no SLURM_JOB_ID). An
// error is one line: a variable Slurm set that makes no sense, or a step
// that does not run one task per node.
absl::StatusOr<std::optional<NodeSpec>> NodesFromSlurm(const EnvLookup& env);

}  // namespace ltd
