// lt-shim's side of the supervisor API (proto/shim.proto): it serves ltd
// the job its JobRunner runs, and keeps time while no ltd watches. Runner
// events arrive on the loop thread; gRPC calls arrive on gRPC's threads
// and go to the loop through Loop::Post.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "clock.h"
#include "job_runner.h"
#include "loop.h"
#include "shim.grpc.pb.h"
#include "shim_record.h"
#include "supervision.h"
#include "write_stream.h"

namespace ltd {

struct ShimEventTraits {
  static constexpr int kLinesDroppedOnTheWay = -2;
  static bool Droppable(const shim::v1::Event& event) { return event.has_output(); }
  static shim::v1::Event Notice(uint64_t dropped) {
    shim::v1::Event notice;
    // -2: not a notice for users (the job's log has every line; a reader
    // of ltd's takes them from there), only a sign that the log grew.
    notice.mutable_output()->set_rank(kLinesDroppedOnTheWay);
    notice.mutable_output()->set_stderr(true);
    notice.mutable_output()->set_data("ltd: " + std::to_string(dropped) +
                                      " output line(s) dropped: ltd was too slow to take them");
    return notice;
  }
};

class ShimService final : public shim::v1::Supervisor::CallbackService, public SupervisionEvents {
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

  ShimService(Loop& loop, Clock& clock, Options options);
  ~ShimService() override;

  // Loop thread. The runner reports to this service. A new job's ranks
  // start (`start`) once ltd watches, so that an attached client sees
  // every line; `done` runs on the loop once the job has
  // ended and ltd has its final record (or no ltd is there to take it).
  void Begin(JobRunner& runner, std::function<void()> start, std::function<void()> done);

  grpc::ServerUnaryReactor* Hello(grpc::CallbackServerContext* ctx,
                                  const shim::v1::HelloRequest* req,
                                  shim::v1::HelloReply* reply) override;
  grpc::ServerWriteReactor<shim::v1::Event>* Watch(grpc::CallbackServerContext* ctx,
                                                   const shim::v1::WatchRequest* req) override;
  grpc::ServerUnaryReactor* Kill(grpc::CallbackServerContext* ctx, const shim::v1::KillRequest* req,
                                 shim::v1::KillReply* reply) override;
  grpc::ServerUnaryReactor* SetOutput(grpc::CallbackServerContext* ctx,
                                      const shim::v1::SetOutputRequest* req,
                                      shim::v1::SetOutputReply* reply) override;
  grpc::ServerUnaryReactor* Stack(grpc::CallbackServerContext* ctx,
                                  const shim::v1::StackRequest* req,
                                  shim::v1::StackReply* reply) override;

  // Loop thread. Whether output lines go to the watchers now.
  bool output_on() const { return output_on_; }

  // SupervisionEvents, from the runner on the loop thread.
  void OnChanged(const Job& job, Change change) override;
  void OnOutput(int rank, Stream stream, std::string_view line) override;
  void OnEnded(const Job& job) override;
  void OnLost(std::string) override {}

 private:
  using Stream = WriteStream<shim::v1::Event, ShimEventTraits>;
  void Broadcast(const shim::v1::Event& event);
  // The record to every watcher, now; later Beats are counted from it.
  void SendRecord(const Job& job);
  void SendProgress();
  void WatcherGone(Stream::Handle* handle);
  void ArmRestoreWindow(Millis window);
  // The job's --signal its DUR before the restore window ends (ltd away).
  void ArmRestoreWarning();
  void CancelRestoreWindow();
  void MaybeDone();

  Loop& loop_;
  Clock& clock_;
  const Options options_;
  JobRunner* runner_ = nullptr;
  std::function<void()> start_;  // until the first watch
  std::function<void()> done_;
  // Loop thread only:
  // What a watcher asked for: Beats, and records as Record messages and
  // without the command line past the first (an ltd of this release).
  struct Watching {
    bool beats = false;
    RecordForm form;
  };
  std::map<std::shared_ptr<Stream::Handle>, Watching> watchers_;
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
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for posted closures
};

}  // namespace ltd
