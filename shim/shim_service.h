// lt-shim's side of the supervisor API (proto/shim.proto): it serves ltd
// the job its JobRunner runs, and keeps time while no ltd watches. What
// carries the calls is not its business (SupervisorServer: frames over a
// socket); everything here runs on the loop thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "clock.h"
#include "job_runner.h"
#include "shim.pb.h"
#include "shim_record.h"
#include "supervision.h"

namespace ltd {

// One ltd watching the job: where its events go.
class WatchSink {
 public:
  // Live output may be dropped on the way (the log has every line); a
  // sink says so with an Output of rank kLinesDroppedOnTheWay.
  static constexpr int kLinesDroppedOnTheWay = -2;
  static bool Droppable(const shim::v1::Event& event) { return event.has_output(); }
  static shim::v1::Event DroppedNotice(uint64_t dropped);

  virtual ~WatchSink() = default;
  // Neither calls back into the service: a sink that finds its watcher
  // gone says so (Unwatch) on a later turn of the loop.
  // Queues `event` for the watcher.
  virtual void Push(const shim::v1::Event& event) = 0;
  // After the final record: the watch ends once the watcher has it all,
  // and then (or should the watcher go first) the sink calls
  // ShimService::Unwatch.
  virtual void Finish() = 0;
};

class ShimService final : public SupervisionEvents {
 public:
  struct Options {
    std::string job_id;
    std::string state_dir;  // canonical
    // How long the job runs on with no ltd watching; 0: it ends when ltd
    // goes. A supervisor that ltd never reached waits at least
    // kFirstContact for it.
    Millis restore_window{10 * 60 * 1000};
    // Progress (steps, heartbeat times) goes to ltd at most this often.
    Millis progress_interval{1000};
  };
  static constexpr Millis kFirstContact{10000};
  static constexpr uint32_t kApiVersion = 2;

  ShimService(Clock& clock, Options options);
  ~ShimService() override;

  // The runner reports to this service. A new job's ranks start (`start`)
  // once ltd watches, so that an attached client sees every line; `done`
  // runs once the job has ended and ltd has its final record (or no ltd
  // is there to take it).
  void Begin(JobRunner& runner, std::function<void()> start, std::function<void()> done);

  // The calls (proto/shim.proto). A refusal is a status with one line.
  shim::v1::HelloReply Hello() const;
  // `sink` watches until it calls Unwatch (it may be at once).
  void Watch(WatchSink* sink, const shim::v1::WatchRequest& request);
  void Unwatch(WatchSink* sink);
  absl::Status Kill(const shim::v1::KillRequest& request);
  // Once this returns, every line the runner reported before is in the
  // log, and every later one follows `on`.
  void SetOutput(bool on);
  using StackDone = std::function<void(absl::StatusOr<shim::v1::StackReply>)>;
  void Stack(const shim::v1::StackRequest& request, StackDone done);

  const std::string& job_id() const { return options_.job_id; }
  // Whether output lines go to the watchers now, and how often ltd said.
  bool output_on() const { return output_on_; }
  int set_output_calls() const { return set_output_calls_; }

  // SupervisionEvents, from the runner on the loop thread.
  void OnChanged(const Job& job, Change change) override;
  void OnOutput(int rank, Stream stream, std::string_view line) override;
  void OnEnded(const Job& job) override;
  void OnLost(std::string) override {}

 private:
  void Broadcast(const shim::v1::Event& event);
  // The record to every watcher, now; later Beats are counted from it.
  void SendRecord(const Job& job);
  void SendProgress();
  void ArmRestoreWindow(Millis window);
  // The job's --signal its DUR before the restore window ends (ltd away).
  void ArmRestoreWarning();
  void CancelRestoreWindow();
  void MaybeDone();

  Clock& clock_;
  const Options options_;
  JobRunner* runner_ = nullptr;
  std::function<void()> start_;  // until the first watch
  std::function<void()> done_;
  // What a watcher asked for: Beats, and records as Record messages and
  // without the command line past the first (an ltd of this release).
  struct Watching {
    bool beats = false;
    RecordForm form;
  };
  std::map<WatchSink*, Watching> watchers_;
  Clock::TimerId restore_timer_ = 0;
  Clock::TimerId restore_warn_timer_ = 0;
  Clock::TimerId progress_timer_ = 0;
  bool record_dirty_ = false;  // a Change::kDetail waits for the progress timer
  bool beats_dirty_ = false;   // a Change::kBeats does
  // Each rank's heartbeat as watchers last heard of it (in a record or
  // Beats): the next Beats carries the ranks whose heartbeat moved since.
  std::vector<RankBeat> beats_sent_;
  bool ended_ = false;
  bool ever_watched_ = false;
  // Output lines go to ltd only while it asks for them (a client attaches
  // or follows); each Watch starts with them on, for an ltd of a release
  // that never asks.
  bool output_on_ = true;
  int set_output_calls_ = 0;
};

}  // namespace ltd
