// A running job as the job table sees it: somebody supervises it (a
// JobRunner in this process for tests and ltrun, an lt-shim process under
// ltd) and reports what happens. The table decides placement; the
// supervision decides everything about the job's life from its start to
// its final record.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "clock.h"
#include "job.h"
#include "process.h"

namespace ltd {

// What changed of a job, as a supervision reports it.
enum class Change {
  // Its course: a state, a failed rank, a root cause, a report, a restart.
  // A supervisor in another process says so at once.
  kCourse,
  // Something else of the record: a rank exited cleanly, an error line.
  // Said at a bounded rate.
  kDetail,
  // Only ranks' heartbeats (RankBeat's fields). Said at a bounded rate, to
  // ltd as the beats alone.
  kBeats,
};

// What a supervision reports, on the loop thread, in order.
class SupervisionEvents {
 public:
  virtual ~SupervisionEvents() = default;
  virtual void OnChanged(const Job& job, Change change) = 0;
  // Some ranks' heartbeats changed, and nothing else since the last
  // OnChanged: what a supervisor in another process sends while the job
  // only makes progress.
  virtual void OnBeats(const std::vector<RankBeat>& beats) { (void)beats; }
  // A line of a rank's output, or (rank -1) a notice about the job.
  virtual void OnOutput(int rank, Stream stream, std::string_view line) = 0;
  // Output turned on again (Supervision::SetOutput) has taken effect:
  // every later line comes through OnOutput. `missed`: earlier ones may
  // be in the job's log alone, where nobody was told of them; without it,
  // output never stopped (it was never switched off, or cannot be).
  virtual void OnOutputResumed(bool missed) { (void)missed; }
  // The job's final record. Nothing comes after it.
  virtual void OnEnded(const Job& job) = 0;
  // The supervisor died before the job ended; what it left of the job is
  // killed. Nothing comes after it.
  virtual void OnLost(std::string why) = 0;
};

// What a kill asks of a job: a teardown (signal 0: the job ends
// CANCELLED), or a signal the job lives on with.
struct KillOrder {
  // A teardown asked for by `by`, or (`why`) for a reason of the caller's.
  static KillOrder Teardown(std::string by, std::string why = "") {
    KillOrder o;
    o.by = std::move(by);
    o.why = std::move(why);
    return o;
  }
  static KillOrder Signal(int signal, bool all_processes) {
    KillOrder o;
    o.signal = signal;
    o.all_processes = all_processes;
    return o;
  }

  int signal = 0;
  // A signal goes to each rank's main process, as torchrun and `docker
  // kill` send it (a "checkpoint now" USR1 must not kill a rank's
  // DataLoader workers); with this, to every process of each rank.
  bool all_processes = false;
  // A teardown: the root cause's message, and who asked for it
  // (RootCause::cancelled_by).
  std::string why;
  std::string by;
  // A signal that is the job's --signal, sent because its end is near:
  // why, in words ("the drain's deadline is in 90s"); the record says when.
  std::string warn;
};

// One rank's stacks as `ltctl stack` shows them (proto/ltd.proto's
// RankStack): what could not be had says why in `note`.
struct RankStack {
  int rank = 0;
  pid_t pid = 0;
  std::string state;   // the main process's, "S (sleeping)"
  std::string kind;    // "python", "native", or "" (no frames)
  std::string frames;  // main thread first
  std::string kernel;  // every thread's state and wchan
  std::string note;
};
struct LiveStacks {
  std::vector<RankStack> ranks;
  Millis took{0};
};

class Supervision {
 public:
  virtual ~Supervision() = default;
  // Carries out `order`. `done` runs on the loop with the answer (a
  // refusal says why in one line), maybe before Kill returns.
  using Done = std::function<void(absl::Status)>;
  virtual void Kill(KillOrder order, Done done) = 0;
  // Whether OnOutput needs to hear of every line: only while somebody
  // watches the job's output, for a supervisor in another process sends
  // each line across. A hint: lines may still come while off (an older
  // supervisor sends them all). A supervision in this process always
  // reports them; it costs nothing.
  virtual void SetOutput(bool on) { (void)on; }
  // The ranks' stacks now (all, or `rank`), within `budget`; `done` on the
  // loop, once. A refusal says why in one line.
  using StacksDone = std::function<void(absl::StatusOr<LiveStacks>)>;
  virtual void Stacks(std::optional<int> rank, Millis budget, StacksDone done) {
    (void)rank;
    (void)budget;
    done(absl::UnimplementedError("this supervisor cannot take stacks"));
  }
};

class SupervisorHost {
 public:
  virtual ~SupervisorHost() = default;
  // How jobs are contained: "cgroup", "subreaper" or "process-group".
  virtual std::string_view containment() const = 0;
  // Starts supervising `job`, placed (slots, port) and PENDING. Events may
  // come before this returns (a job that cannot start ends at once).
  virtual std::unique_ptr<Supervision> Start(const Job& job, SupervisionEvents& events) = 0;
};

}  // namespace ltd
