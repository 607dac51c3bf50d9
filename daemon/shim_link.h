// ltd's link to one supervisor (lt-shim): its process (a pidfd, polled
// for its exit), its channel (frames, or gRPC for an earlier release's
// supervisor: shim_channel.h), the watch on it, the output switch, and the
// events of the job table it reports to. Outlives its Supervision until
// the supervisor process is gone, or free for another job; when it dies
// before the job ended, kills what it left and says the job is lost.
// Loop thread.
#pragma once

#include <uv.h>

#include <functional>
#include <memory>
#include <string>

#include "containment_factory.h"
#include "fd.h"
#include "job_store.h"
#include "loop.h"
#include "output_switch.h"
#include "shim_channel.h"
#include "supervision.h"
#include "uv_handle.h"

namespace ltd {

class ShimLink : public std::enable_shared_from_this<ShimLink> {
 public:
  // What the links of one host share; they outlive every link.
  struct Context {
    Loop& loop;
    const JobStore& store;
    const ContainmentPlan& plan;
    // The link's process is gone and it is done: the host lets go of it.
    std::function<void(ShimLink*)> gone;
  };

  // Watches the supervisor `pid` of `job_id` over `channel`, reporting to
  // `events`. `from_start`: a supervisor ltd just gave its job, which
  // starts the job once watched, so this first watch carries every line.
  static std::shared_ptr<ShimLink> Watch(const Context& context, std::string job_id, pid_t pid,
                                         Fd pidfd, std::unique_ptr<ShimChannel> channel,
                                         SupervisionEvents& events, bool from_start);
  ~ShimLink();
  ShimLink(const ShimLink&) = delete;
  ShimLink& operator=(const ShimLink&) = delete;

  // The job table's side of it; the table lets go of the job by dropping it.
  static std::unique_ptr<Supervision> SupervisionOf(std::shared_ptr<ShimLink> link);

  // ltd stops: nothing is reported any more, nothing is watched.
  void Detach();

  pid_t pid() const { return pid_; }
  // The supervisor said it is free for another job (spare_pool.h): done
  // with this one as if it had exited, but not reaped here. False when
  // this link was done with it already (an earlier job's).
  bool Released();

 private:
  ShimLink(const Context& context, std::string job_id, pid_t pid, Fd pidfd,
           std::unique_ptr<ShimChannel> channel, SupervisionEvents& events);
  class Supervised;
  void BeginWatch(bool from_start = false);
  void OnEvent(const shim::v1::Event& event);
  void End(const Job& job);
  void OnStreamEnd(const std::string& error);
  void Rewatch();
  void OnExit();
  void FinishExit();
  void WantOutput(bool on);
  // What the output switch asks; `resumed` reaches the job table on a
  // later turn unless `now` (the answer of a call is a turn of its own).
  void Carry(const OutputSwitch::Actions& actions, bool now = false);
  void SendOutputWish(bool on);
  void Kill(KillOrder order, Supervision::Done done);
  void Stacks(std::optional<int> rank, Millis budget, Supervision::StacksDone done);
  bool Reporting() const { return events_ != nullptr && !ended_; }

  const Context& context_;
  const std::string job_id_;
  const pid_t pid_;
  Fd pidfd_;
  UvPtr<uv_poll_t> exit_poll_;
  UvPtr<uv_timer_t> rewatch_timer_;
  std::unique_ptr<ShimChannel> channel_;
  bool watching_ = false;      // a watch is open on channel_
  SupervisionEvents* events_;  // null once the job table let go
  bool ended_ = false;
  bool exited_ = false;  // the process is gone (reaped when it was ours)
  std::string exit_text_ = "is gone";
  OutputSwitch output_;
};

}  // namespace ltd
