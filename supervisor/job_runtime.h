// One attempt of a job while it lives: what the runner tracks of it and its
// ranks beyond their records (output buffers, heartbeat parsers, the log,
// the watchdog's clock, a hang being investigated), its phase, and its
// timers, which it cancels when it goes. The runner holds the current
// attempt; every callback holds its attempt weakly, so an answer that comes
// after its attempt ended (a stack sample, a timer) finds nothing and is
// dropped. Loop thread only.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "clock.h"
#include "fd.h"
#include "heartbeat.h"
#include "job.h"
#include "job_log.h"
#include "line_splitter.h"
#include "output_files.h"
#include "run_verdict.h"
#include "terminate_text.h"

namespace ltd {

// Where an attempt is, from its start to its end. Every change goes
// through JobRunner::Enter, which logs it.
enum class Phase {
  kRunning,          // ranks run; the watchdog watches them
  kInvestigating,    // a hang found: stacks are taken before anything is signalled
  kHeld,             // the hang report is taken; the ranks are left as they are (--hold-on-hang)
  kTearingDown,      // SIGTERM sent, SIGKILL after the grace; ranks still to be reaped
                     // (one still there as long again after it would not die: left)
  kEmptying,         // every rank reaped; what they left behind still to go
  kBackoff,          // ended; the next attempt waits its backoff
  kAwaitingRun,      // ended; the next attempt waits for every node of the run
  kAwaitingVerdict,  // ended; the record waits for the run's root cause (multi-node)
  kEnded,            // the job's last attempt: the job ended
};
std::string_view ToString(Phase p);

struct RankRuntime {
  static constexpr size_t kMaxOutputLine = 64 * 1024;

  LineSplitter stdout_lines{kMaxOutputLine};
  LineSplitter stderr_lines{kMaxOutputLine};
  HeartbeatParser heartbeats;
  bool alive = false;
  bool malformed_logged = false;
  std::string exec_error;  // the exec shim could not start the program
  // A Python rank sent SIGABRT for its faulthandler traceback: its stderr
  // until it exits is its stack.
  bool capturing_stack = false;
  bool faulthandler_asked = false;  // in this investigation
  std::string stack;
  // What std::terminate said on its stderr, should it die of SIGABRT.
  TerminateText terminate;

  // Watchdog, in monotonic time. The deadline is derived, never stored, so a
  // heartbeat costs one assignment and no timer work.
  Millis started{0};
  std::optional<Millis> last_beat;
  std::optional<Millis> timeout;  // a `timeout DUR` from the rank overrides the job's

  // Automatic heartbeats (docs/user-guide.md): ltd's module runs in this rank (`auto
  // on`), unless the rank beats itself, which takes precedence for good.
  bool auto_on = false;
  // It reported since `auto on` (progress, a stack, a late check): past its
  // start-up. Until then (importing, waiting in the rendezvous for a slower
  // peer) it is starting, which is no evidence that the job stopped.
  bool auto_reported = false;
  bool explicit_beats = false;
  std::string auto_stack;  // where its main thread stopped, until it moves again
  // Its first line on stderr that says a peer went away or a collective
  // timed out (run_verdict.h's PeerLossIn): a failure that follows is a
  // consequence of another rank's. Bounded.
  std::string peer_loss;
  static constexpr size_t kMaxPeerLoss = 512;
  // Its main thread's CPU time (clock ticks) at the last probe of a quiet
  // spell (JobRunner::ProbeCpu); nullopt when not read in this spell.
  std::optional<uint64_t> cpu_mark;
  // The signal on which ltd's module has faulthandler write every thread
  // to the stack pipe (`auto stacksig N`); 0: none registered.
  int stack_signal = 0;
  bool Automatic() const { return alive && auto_on && !explicit_beats; }

  // Step rate over a window of at least kRateWindow.
  static constexpr Millis kRateWindow{2000};
  Millis rate_anchor_time{0};
  int64_t rate_anchor_step = -1;
  // A step seen at `now`: updates `rate` once the window has passed.
  void MeasureRate(int64_t step, Millis now, double& rate) {
    if (rate_anchor_step < 0) {
      rate_anchor_step = step;
      rate_anchor_time = now;
    } else if (now - rate_anchor_time >= kRateWindow) {
      const double secs = static_cast<double>((now - rate_anchor_time).count()) / 1000.0;
      rate = static_cast<double>(step - rate_anchor_step) / secs;
      rate_anchor_step = step;
      rate_anchor_time = now;
    }
  }

  std::optional<Millis> Deadline(Millis heartbeat_timeout, Millis startup_timeout) const {
    if (!alive) return std::nullopt;
    // Watched by ltd's module and reporting: its start-up is over (the
    // module reports once the rendezvous is through); the job-level
    // automatic deadline watches it from then on.
    if (!last_beat && Automatic() && auto_reported) return std::nullopt;
    if (last_beat) {
      const Millis t = timeout.value_or(heartbeat_timeout);
      if (t.count() <= 0) return std::nullopt;
      return *last_beat + t;
    }
    if (timeout && timeout->count() <= 0) return std::nullopt;
    if (startup_timeout.count() <= 0) return std::nullopt;
    return started + startup_timeout;
  }
};

// A hang found and the stacks being taken before the teardown.
struct Investigation {
  // What the watchdog saw, for the final message: "no heartbeat for 3s".
  std::string what;
  // The verdict names a stopped rank: no stack can overrule that.
  bool settled = false;
  // A hang found on another node: the ranks there wait in a collective,
  // so a rank here whose stack shows none is what they wait for.
  bool remote = false;
  // Answers still to come: each Python rank's traceback, and the sampler's
  // (one for every native rank).
  int pending = 0;
};

class LiveAttempt {
 public:
  LiveAttempt(Clock& clock, size_t ranks) : ranks(ranks), clock_(clock) {}
  ~LiveAttempt() {
    for (Clock::TimerId* t :
         {&grace_timer, &kill_timer, &restart_timer, &watchdog_timer, &investigation_timer,
          &hold_timer, &cpu_probe_timer, &verdict_timer, &held_timer})
      Cancel(*t);
  }
  LiveAttempt(const LiveAttempt&) = delete;
  LiveAttempt& operator=(const LiveAttempt&) = delete;

  // Stops `timer` if it is set, and clears it.
  void Cancel(Clock::TimerId& timer) {
    if (timer != 0) clock_.CancelTimer(timer);
    timer = 0;
  }

  Phase phase = Phase::kRunning;
  std::vector<RankRuntime> ranks;
  std::optional<JobLogWriter> log;     // every rank's lines as "[R] line"
  std::optional<OutputFiles> outputs;  // --output, --error
  std::optional<RootCause> cause;      // of this attempt
  // The failed exit of a rank that lost its peer, while the peer that went
  // first may still be on its way out: the cause if none comes by
  // held_timer (JobRunner::kConsequenceWait).
  std::optional<RootCause> held_cause;
  Clock::TimerId held_timer = 0;
  // The job's supervision was lost (Abandon): it ends LOST, whatever the cause.
  std::optional<RootCause> lost;
  // The run's cause was a cancel on another node: no node restarts. A fact
  // of the cause, not a phase.
  bool run_cancelled = false;
  int live = 0;  // ranks not yet reaped
  // OOM kills already put down to a rank, by rank (-1: the job's count).
  std::map<int, uint64_t> oom_kills_seen;
  Clock::TimerId grace_timer = 0;
  // After the SIGKILL: a rank (or, once the ranks are gone, a process of
  // theirs) still there when it fires would not die.
  Clock::TimerId kill_timer = 0;
  Clock::TimerId restart_timer = 0;  // the next attempt waits its backoff
  Clock::TimerId watchdog_timer = 0;
  Clock::TimerId investigation_timer = 0;
  Clock::TimerId hold_timer = 0;       // a hung job held for a look ends
  Clock::TimerId cpu_probe_timer = 0;  // automatic heartbeats: JobRunner::ProbeCpu
  // A multi-node run: the run's root cause, chosen from every node's
  // evidence (OnRunVerdict), as this node records it; the record of a
  // failed attempt waits for it, up to verdict_timer.
  std::optional<RootCause> verdict;
  Clock::TimerId verdict_timer = 0;
  // A hang's verdict: every node's report it came with, and the node it
  // names, for the run's hang report in the record (JobRunner::RecordRunHang).
  std::optional<std::vector<NodeReport>> run_reports;
  int verdict_node = -1;
  std::optional<Millis> watchdog_at;
  // The verdict on the deadline `verdict_held_for` waits until
  // `verdict_hold_until` for ranks that may have stopped with it.
  std::optional<Millis> verdict_held_for;
  Millis verdict_hold_until{0};

  // Automatic heartbeats: when any rank last made progress, from the
  // first `auto on`. The job is hung when none has for auto_timeout.
  std::optional<Millis> auto_progress;
  Millis auto_timeout{0};
  bool auto_verdict = false;  // the hang being investigated is the job-level one
  // A rank still starting (no `auto on` yet: importing torch, which takes
  // long on a busy machine; or nothing reported since: waiting in the
  // rendezvous for a slower peer) is no evidence that the job stopped:
  // while one is alive, the verdict waits for its start-up, up to
  // `startup_limit` from its start (its own start-up deadline, where there
  // is one, fires before).
  std::optional<Millis> AutoDeadline(Millis startup_limit) const {
    if (!auto_progress || auto_timeout.count() <= 0) return std::nullopt;
    bool watched = false;
    std::optional<Millis> starting_until;
    for (const RankRuntime& rr : ranks) {
      const bool automatic = rr.Automatic();
      watched = watched || automatic;
      const bool starting =
          automatic ? !rr.auto_reported : rr.alive && !rr.auto_on && !rr.explicit_beats;
      if (!starting) continue;
      const Millis until = rr.started + startup_limit;
      if (!starting_until || until > *starting_until) starting_until = until;
    }
    if (!watched) return std::nullopt;
    const Millis d = *auto_progress + auto_timeout;
    return starting_until ? std::max(d, *starting_until) : d;
  }

  // From the hang verdict on (kInvestigating and after).
  std::optional<Investigation> investigation;

 private:
  Clock& clock_;
};

}  // namespace ltd
