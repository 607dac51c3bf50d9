// The fence of a multi-node run on etcd (supervisor/run_fence.h): after the
// rendezvous, a watch on the run's prefix brings the run's root cause, the
// nodes' states and the loss of a node to this node's runner; a worker
// thread writes this node's cause and state and waits at restart barriers.
// Both post what they learn to the loop; the loop thread never blocks on
// etcd.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "etcd_client.h"
#include "rendezvous.h"
#include "run_fence.h"

namespace ltd::rdzv {

class EtcdFence final : public RunFence {
 public:
  // Runs a closure on the loop thread (Loop::Post).
  using Post = std::function<void(std::function<void()>)>;
  // Starts watching the run where the rendezvous left it.
  static absl::StatusOr<std::unique_ptr<EtcdFence>> Start(std::unique_ptr<Rendezvous> rdzv,
                                                          Post post);
  ~EtcdFence() override;  // Close()

  void SetEvents(RunFenceEvents* events) override;
  void Publish(int attempt, const RootCause& cause) override;
  void SetState(JobState state, const std::optional<RootCause>& cause) override;
  void BeginAttempt(int attempt, std::function<void(absl::Status)> ready) override;

  // Writes what is queued (this node's final state), leaves the run and
  // stops the threads. Loop thread; blocks for at most a few seconds when
  // etcd is gone.
  void Close();

  int node_rank() const { return rdzv_->node_rank(); }

 private:
  // The loop's end of the fence: events posted after SetEvents(nullptr)
  // or Close() find nobody and are dropped.
  struct Sink {
    RunFenceEvents* events = nullptr;  // loop thread only
  };

  EtcdFence(std::unique_ptr<Rendezvous> rdzv, Post post);
  void Enqueue(std::function<void()> task);
  void WorkerLoop();
  void Deliver(std::function<void(RunFenceEvents&)> fn);
  void OnWatchEvents(std::vector<etcd::WatchEvent> events);
  void Notice(std::string line);
  void NodeLost(int node);
  std::vector<NodeStatus> NodesSnapshot();  // watch thread

  std::unique_ptr<Rendezvous> rdzv_;
  Post post_;
  std::shared_ptr<Sink> sink_ = std::make_shared<Sink>();
  std::atomic<int> attempt_{0};
  std::atomic<bool> closing_{false};
  std::atomic<bool> etcd_lost_noticed_{false};

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  bool stop_ = false;                        // guarded by mu_
  std::thread worker_;

  // The watch thread's view of the run.
  std::map<int, NodeStatus> nodes_;
  std::map<int, bool> members_;  // node -> its nodes/<r> key exists
  std::unique_ptr<etcd::Watch> watch_;
};

}  // namespace ltd::rdzv
