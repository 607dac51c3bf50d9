// Supervision in this process: a JobRunner per job on the caller's loop.
// The job table's tests run jobs this way with a fake launcher and clock.
// Every record the runner reports reaches the table as an lt-shim's would:
// encoded into the supervisor API's event (proto/shim_record.h), as bytes,
// and decoded again, so that the tests check the contract production
// keeps, whether the record was saved included.
#pragma once

#include "job_runner.h"
#include "supervision.h"

namespace ltd {

class LocalSupervisorHost final : public SupervisorHost {
 public:
  LocalSupervisorHost(Clock& clock, ProcessLauncher& launcher, JobStore& store,
                      StackSampler* sampler, RunnerConfig config)
      : clock_(clock), launcher_(launcher), store_(store), sampler_(sampler), config_(config) {}

  std::string_view containment() const override { return launcher_.containment(); }
  std::unique_ptr<Supervision> Start(const Job& job, SupervisionEvents& events) override;

 private:
  Clock& clock_;
  ProcessLauncher& launcher_;
  JobStore& store_;
  StackSampler* sampler_;
  RunnerConfig config_;
};

}  // namespace ltd
