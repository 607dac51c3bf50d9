#include "run_join.h"

#include <atomic>
#include <thread>

#include "join_run.h"
#include "mutex_mode.h"

namespace ltd {
namespace {

class EtcdRunJoin final : public RunJoin {
 public:
  explicit EtcdRunJoin(Loop& loop) : loop_(loop) {}
  ~EtcdRunJoin() override { Stop(); }

  void Start(JobRunner& runner) override {
    runner.BeginRendezvous();
    if (runner.ended()) return;
    joiner_ = std::thread([this, &runner, job = runner.job()]() mutable {
      auto post = [this](std::function<void()> fn) { loop_.Post(std::move(fn)); };
      auto joined = rdzv::JoinRun(job, post, "", [this] { return give_up_.load(); });
      auto result = std::make_shared<decltype(joined)>(std::move(joined));
      loop_.Post([this, &runner, job, result] {
        if (!result->ok()) return runner.FailToJoin(std::string(result->status().message()));
        fence_ = std::move(**result);
        if (runner.ended()) return fence_->Close();  // cancelled meanwhile
        runner.JoinedRun(fence_.get(), job.spec.nodes, job.master_port);
        runner.Start();
      });
    });
  }

  void Stop() override {
    give_up_ = true;
    if (joiner_.joinable()) joiner_.join();
    if (fence_) fence_->Close();
  }

 private:
  Loop& loop_;
  std::unique_ptr<rdzv::EtcdFence> fence_;
  std::thread joiner_;
  std::atomic<bool> give_up_{false};
};

}  // namespace

bool CanJoinRuns() { return true; }
void SetUpJoiningProcess() { NoMutexDeadlockGraph(); }
std::unique_ptr<RunJoin> MakeRunJoin(Loop& loop) { return std::make_unique<EtcdRunJoin>(loop); }

}  // namespace ltd
