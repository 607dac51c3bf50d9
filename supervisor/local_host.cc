#include "local_host.h"

namespace ltd {
namespace {

class LocalSupervision final : public Supervision {
 public:
  explicit LocalSupervision(std::unique_ptr<JobRunner> runner) : runner_(std::move(runner)) {}
  void Kill(KillOrder order, Done done) override { done(runner_->Kill(std::move(order))); }

 private:
  std::unique_ptr<JobRunner> runner_;
};

}  // namespace

std::unique_ptr<Supervision> LocalSupervisorHost::Start(const Job& job, SupervisionEvents& events) {
  auto runner =
      std::make_unique<JobRunner>(clock_, launcher_, store_, sampler_, config_, job, events);
  JobRunner& r = *runner;
  auto supervision = std::make_unique<LocalSupervision>(std::move(runner));
  r.Start();
  return supervision;
}

}  // namespace ltd
