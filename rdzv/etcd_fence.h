// The fence of a multi-node run on etcd (supervisor/run_fence.h): after the
// rendezvous, a watch on the run's prefix brings the nodes' reports, the
// run's verdict, the nodes' states and the loss of a node to this node's
// runner; a worker thread writes this node's report and state, decides the
// run's verdict when it is due, and waits at restart barriers. Both post
// what they learn to the loop; the loop thread never blocks on etcd.
//
// The verdict (docs/design.md, "The run's root cause"): every node applies
// the same ranking (run_verdict.h) to the reports under attempts/<k>/ once
// it is ready, and writes the result to attempts/<k>/verdict if no node did
// yet; every node records what that key says, so all agree.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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
  void Publish(int attempt, const NodeReport& report) override;
  std::chrono::milliseconds verdict_window() const override;
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

  using Clock = std::chrono::steady_clock;
  // What the watch thread has heard of one attempt; guarded by ev_mu_.
  struct AttemptEvidence {
    std::map<int, NodeReport> reports;  // node -> its own report
    std::map<int, NodeReport> gone;     // node -> it vanished
    std::optional<Clock::time_point> window_end;
    bool failing_told = false;  // the runner heard that the run fails
    bool decided = false;       // this node wrote (or tried to) its verdict
    bool verdict_told = false;  // the runner heard the run's verdict
    // A hang's verdict, held until every node's evidence is in or the
    // window has passed: the run's hang report needs every node's.
    std::optional<std::pair<NodeReport, std::string>> held;  // verdict, note
  };
  // Whether every node of the run has reported (not pending) or vanished.
  static bool EvidenceIn(const AttemptEvidence& ev, int nnodes);
  // Every report and vanished node of the attempt; `with_hang`: with
  // their hang evidence (for the runner), else without (for the ranking).
  static std::vector<NodeReport> AllOf(const AttemptEvidence& ev, bool with_hang = true);

  EtcdFence(std::unique_ptr<Rendezvous> rdzv, Post post);
  // A report or a vanished node of `attempt` came in (watch thread).
  void OnReport(int attempt, NodeReport report, bool gone);
  void OnVerdict(int attempt, NodeReport verdict, std::string note);
  // The verdict of `attempt` to the runner, with the reports it came from.
  void Tell(int attempt, NodeReport verdict, std::string note, std::vector<NodeReport> reports);
  // Chooses the run's cause of `attempt` if it is ready (worker thread).
  void Decide(int attempt);
  // Attempts whose window has passed (worker thread).
  void DecideDue();
  void WakeAt(Clock::time_point when);
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
  std::optional<Clock::time_point> due_;     // guarded by mu_: a window ends
  std::thread worker_;

  // The watch thread's view of the run.
  std::map<int, NodeStatus> nodes_;
  std::map<int, bool> members_;  // node -> its nodes/<r> key exists
  std::unique_ptr<etcd::Watch> watch_;

  std::mutex ev_mu_;                         // never held with mu_
  std::map<int, AttemptEvidence> evidence_;  // by attempt; a few at most
};

}  // namespace ltd::rdzv
