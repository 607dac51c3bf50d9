// The runner hearing from its ranks: output lines, heartbeat lines,
// exits. Each may decide a root cause and start the teardown.
#include <signal.h>

#include "byte_size.h"
#include "duration.h"
#include "job_runner.h"
#include "run_verdict.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
void JobRunner::OnOutput(int rank, Stream stream, std::string_view data) {
  LiveAttempt& rt = At();
  RankRuntime& rr = rt.ranks[static_cast<size_t>(rank)];
  LineSplitter& lines = stream == Stream::kStdout ? rr.stdout_lines : rr.stderr_lines;
  // The chunk's lines arrived now: one stamp for them all.
  std::string stamp = LogStamp(clock_.Now());
  if (stream == Stream::kStderr) MarkStderr(stamp);
  const std::string prefix = stamp + Cat("[", rank, "] ");
  std::string stored;  // this chunk's lines as the log keeps them: one write
  auto emit = [&](std::string_view line, bool) {
    if (rr.capturing_stack && stream == Stream::kStderr) {
      // faulthandler's traceback, taken for the hang report: it goes there,
      // not into the rank's output, where its "Fatal Python error: Aborted"
      // would read like the program's own crash (a line in the output says
      // where it went).
      return CaptureStack(rank, line);
    }
    if (stream == Stream::kStderr) rr.terminate.Line(line);
    if (fence_ != nullptr && stream == Stream::kStderr && rr.peer_loss.empty() &&
        !PeerLossIn(line).empty()) {
      rr.peer_loss = std::string(line.substr(0, RankRuntime::kMaxPeerLoss));
    }
    stored.append(prefix).append(line).push_back('\n');
  };
  if (data.empty()) {
    lines.Finish(emit);  // end of stream: the last unterminated line
  } else {
    lines.Feed(data, emit);
  }
  if (stored.empty()) return;
  // The log first, then the watchers: a `logs -f` that hears of a line
  // re-reads the log, and must find it there (it waited for the next line
  // otherwise, maybe until the job's end).
  if (rt.log) rt.log->Append(stored);
  if (rt.outputs) rt.outputs->Write(rank, stream, stored, prefix.size());
  for (size_t at = 0; at < stored.size();) {
    const size_t end = stored.find('\n', at);
    Output(rank, stream,
           std::string_view(stored).substr(at + prefix.size(), end - at - prefix.size()));
    at = end + 1;
  }
}

void JobRunner::OnControl(int rank, std::string_view data) {
  LiveAttempt& rt = At();
  RankRuntime& rr = rt.ranks[static_cast<size_t>(rank)];
  rr.heartbeats.Feed(
      data, [&](const HeartbeatMessage& msg) { OnHeartbeat(rank, msg); },
      [&](std::string_view bad) {
        if (rr.malformed_logged) return;
        rr.malformed_logged = true;  // once per rank: a noisy rank must not flood the journal
        spdlog::warn(
            "job={} rank={} sent a malformed heartbeat line ({} bytes), ignored; "
            "further ones are ignored silently",
            job_.id, rank, bad.size());
      });
}

void JobRunner::OnHeartbeat(int rank, const HeartbeatMessage& msg) {
  Job& job = job_;
  LiveAttempt& rt = At();
  RankRuntime& rr = rt.ranks[static_cast<size_t>(rank)];
  Rank& rec = job.ranks[static_cast<size_t>(rank)];
  const Millis now = clock_.Monotonic();
  // A line that says again what the rank said last changes nothing, and
  // costs nothing more than its parse: a rank writing `timeout 30s` or the
  // same `error` in a loop is a beat at most, never a record, a log line
  // or a timer.
  if (msg.kind == HeartbeatMessage::Kind::kTimeout && rr.timeout == msg.timeout && rr.last_beat &&
      rr.explicit_beats) {
    HeartbeatMessage beat;
    beat.kind = HeartbeatMessage::Kind::kBeat;
    return OnHeartbeat(rank, beat);
  }
  if (msg.kind == HeartbeatMessage::Kind::kError && rec.error_message == msg.text) return;
  if (msg.kind == HeartbeatMessage::Kind::kExecFailed && rr.exec_error == msg.text) return;
  if (msg.kind == HeartbeatMessage::Kind::kBeat || msg.kind == HeartbeatMessage::Kind::kTimeout) {
    // The rank beats itself: its own heartbeats watch it from now on, and
    // any beat is progress for the job-level automatic watchdog.
    rr.explicit_beats = true;
    rr.auto_stack.clear();
    if (rt.auto_progress) rt.auto_progress = now;
    job.heartbeat_mode = HeartbeatMode::kExplicit;
    job.hang_timeout = msg.kind == HeartbeatMessage::Kind::kTimeout
                           ? msg.timeout
                           : rr.timeout.value_or(job.spec.heartbeat_timeout);
  }
  switch (msg.kind) {
    case HeartbeatMessage::Kind::kBeat: {
      // The first beat swaps a startup deadline for a heartbeat one, which
      // may be earlier; later beats only move the deadline later, so an
      // armed timer stays valid and a beat costs no timer work.
      const bool first = !rr.last_beat;
      rr.last_beat = now;
      rec.last_heartbeat_at = clock_.Now();
      if (msg.step) {
        rec.last_step = *msg.step;
        rr.MeasureRate(*msg.step, now, rec.steps_per_second);
      }
      if (first) ArmWatchdog();
      events_.OnChanged(job, Change::kBeats);
      return;
    }
    case HeartbeatMessage::Kind::kTimeout:
      rr.timeout = msg.timeout;
      rr.last_beat = now;
      rec.last_heartbeat_at = clock_.Now();
      ArmWatchdog();
      return;
    case HeartbeatMessage::Kind::kError:
      rec.error_message = msg.text;
      events_.OnChanged(job, Change::kDetail);
      return;
    case HeartbeatMessage::Kind::kExecFailed:
      rr.exec_error = msg.text;
      return;
    case HeartbeatMessage::Kind::kAutoStackSignal:
      // Only a real-time signal, which nothing but this handler takes: a
      // rank cannot have its supervisor send itself SIGKILL or SIGSTOP.
      if (*msg.step >= SIGRTMIN && *msg.step <= SIGRTMAX) {
        At().ranks[static_cast<size_t>(rank)].stack_signal = static_cast<int>(*msg.step);
      }
      return;
    case HeartbeatMessage::Kind::kAutoOn:
    case HeartbeatMessage::Kind::kAutoStep:
    case HeartbeatMessage::Kind::kAutoLive:
    case HeartbeatMessage::Kind::kAutoLate:
    case HeartbeatMessage::Kind::kAutoStack:
      return OnAutoHeartbeat(rank, msg);
  }
}

Millis JobRunner::AutoTimeout() const {
  return job_.spec.heartbeat_timeout.count() > 0 ? job_.spec.heartbeat_timeout
                                                 : config_.auto_heartbeat_timeout;
}

void JobRunner::OnAutoHeartbeat(int rank, const HeartbeatMessage& msg) {
  Job& job = job_;
  LiveAttempt& rt = At();
  RankRuntime& rr = rt.ranks[static_cast<size_t>(rank)];
  Rank& rec = job.ranks[static_cast<size_t>(rank)];
  // A rank's own heartbeats take precedence; a rank that never said `auto
  // on` is not ltd's module talking.
  if (rr.explicit_beats) return;
  if (msg.kind != HeartbeatMessage::Kind::kAutoOn && !rr.auto_on) return;
  const Millis now = clock_.Monotonic();
  if (msg.kind != HeartbeatMessage::Kind::kAutoOn && !rr.auto_reported) {
    // Past its start-up: the automatic deadline may judge the job by it now.
    rr.auto_reported = true;
    rt.auto_progress = now;
    ArmWatchdog();
  }
  switch (msg.kind) {
    case HeartbeatMessage::Kind::kAutoOn:
      if (rr.auto_on) return;  // said already: once is news, again is nothing
      rr.auto_on = true;
      if (job.heartbeat_mode != HeartbeatMode::kExplicit) {
        job.heartbeat_mode = HeartbeatMode::kAutomatic;
        job.hang_timeout = AutoTimeout();
      }
      rt.auto_timeout = AutoTimeout();
      rt.auto_progress = now;
      spdlog::info("job={} rank={} automatic heartbeats on", job.id, rank);
      ArmWatchdog();
      return events_.OnChanged(job, Change::kCourse);
    case HeartbeatMessage::Kind::kAutoStep:
      rec.last_step = *msg.step;
      [[fallthrough]];
    case HeartbeatMessage::Kind::kAutoLive:
      rt.auto_progress = now;
      rr.auto_stack.clear();
      rec.last_heartbeat_at = clock_.Now();
      if (msg.step) rr.MeasureRate(*msg.step, now, rec.steps_per_second);
      return events_.OnChanged(job, Change::kBeats);
    case HeartbeatMessage::Kind::kAutoLate:
      // The module was not scheduled for part of its interval (a loaded
      // machine): that time is no evidence that the rank stopped, so the
      // job's clock of "no progress" starts again. Its stack stays: it is
      // still where it last stopped.
      rt.auto_progress = now;
      return;
    case HeartbeatMessage::Kind::kAutoStack:
      rr.auto_stack = msg.text;
      return;
    default:
      return;
  }
}

std::optional<RootCause> JobRunner::OomCause(int rank, ExitStatus status) {
  const Job& job = job_;
  LiveAttempt& rt = At();
  // The kernel counts an OOM kill before it sends the SIGKILL, so the
  // count is in when the rank's exit is seen. Each rank's own count with
  // --mem-per-rank, the job's otherwise: only what is new since it was
  // last looked at is this exit's.
  const JobLimits& limits = job.spec.limits;
  const int key = limits.memory_per_rank_bytes != 0 ? rank : -1;
  const std::optional<uint64_t> kills = launcher_.OomKills(job.id, rank);
  if (!kills || *kills <= rt.oom_kills_seen[key]) return std::nullopt;
  rt.oom_kills_seen[key] = *kills;
  std::string limit;
  if (limits.memory_bytes != 0)
    limit = "the job's memory limit is " + FormatByteSize(limits.memory_bytes);
  if (limits.memory_per_rank_bytes != 0) {
    limit += Cat(limit.empty() ? "" : ", ", "each rank's is ",
                 FormatByteSize(limits.memory_per_rank_bytes));
  }
  RootCause cause;
  cause.rank = rank;
  cause.at = clock_.Now();
  cause.reason = CauseReason::kOom;
  cause.signal = status.term_signal;
  cause.exit_code = status.term_signal != 0 ? 0 : status.exit_code;
  if (status.term_signal == SIGKILL) {
    cause.message = Cat("rank ", rank, " was killed by the OOM killer: ", limit);
  } else {
    cause.message =
        Cat("rank ", rank, " ", status.term_signal != 0 ? "died of signal " : "exited with code ",
            status.term_signal != 0 ? status.term_signal : status.exit_code,
            " after the OOM killer killed ",
            key >= 0 ? "one of its processes" : "a process of the job", ": ", limit);
  }
  return cause;
}

RootCause JobRunner::ExitCause(int rank, ExitStatus status) {
  const RankRuntime& rr = At().ranks[static_cast<size_t>(rank)];
  const Rank& rec = job_.ranks[static_cast<size_t>(rank)];
  RootCause cause;
  cause.rank = rank;
  cause.at = clock_.Now();
  if (!rr.exec_error.empty()) {
    cause.reason = CauseReason::kSpawnFailed;
    cause.exit_code = status.exit_code;
    cause.message = rr.exec_error;
  } else if (auto oom = OomCause(rank, status)) {
    cause = std::move(*oom);
  } else if (status.term_signal != 0) {
    cause.reason = CauseReason::kSignaled;
    cause.signal = status.term_signal;
    cause.message =
        Cat("rank ", rank, " died of signal ", status.term_signal, " (",
            sigabbrev_np(status.term_signal) ? sigabbrev_np(status.term_signal) : "?", ")");
    // An uncaught C++ exception (PyTorch's NCCL watchdog ends a rank so):
    // which one, as the rank's last words on stderr said.
    if (status.term_signal == SIGABRT && !rr.terminate.text().empty()) {
      cause.message += ": " + rr.terminate.text();
    }
  } else {
    cause.reason = CauseReason::kExited;
    cause.exit_code = status.exit_code;
    cause.message = Cat("rank ", rank, " exited with code ", status.exit_code);
  }
  if (!rec.error_message.empty() && cause.reason != CauseReason::kOom) {
    cause.message = rec.error_message;
  }
  return cause;
}

bool JobRunner::LostItsPeer(const RootCause& cause, const std::string& peer_loss) {
  if (cause.reason != CauseReason::kExited && cause.reason != CauseReason::kSignaled) return false;
  return PeerLossIn(cause.message) == kLostPeer || PeerLossIn(peer_loss) == kLostPeer;
}

void JobRunner::FailHeld() {
  LiveAttempt& rt = At();
  if (!rt.held_cause) return;
  RootCause cause = std::move(*rt.held_cause);
  Fail(std::move(cause));  // drops the held cause and its timer
}

void JobRunner::OnExit(int rank, ExitStatus status) {
  Job& job = job_;
  LiveAttempt& rt = At();
  RankRuntime& rr = rt.ranks[static_cast<size_t>(rank)];
  Rank& rec = job.ranks[static_cast<size_t>(rank)];
  if (!rr.alive) return;
  rr.alive = false;
  --rt.live;
  if (status.term_signal != 0) {
    rec.signal = status.term_signal;
  } else {
    rec.exit_code = status.exit_code;
  }
  const bool failed = status.term_signal != 0 || status.exit_code != 0;
  spdlog::log(failed ? spdlog::level::warn : spdlog::level::info, "job={} rank={} pid={} {} {}",
              job.id, rank, rec.pid, status.term_signal ? "died of signal" : "exited with",
              status.term_signal ? status.term_signal : status.exit_code);
  if (!failed) {
    SetRankState(rec, RankState::kExited);
    // Not a change of the job's course; whoever watches learns it with the
    // next progress report.
    events_.OnChanged(job, Change::kDetail);
  } else if (rt.phase != Phase::kRunning || rt.cause) {
    SetRankState(rec, rt.cause && rt.cause->rank == rank ? RankState::kFailed : RankState::kKilled);
  } else {
    SetRankState(rec, RankState::kFailed);
    RootCause cause = ExitCause(rank, status);
    if (rt.held_cause) {
      // A rank that lost its peer failed before: this one's failure is
      // the stronger evidence unless it is a consequence too.
      if (LostItsPeer(cause, rr.peer_loss)) {
        if (rt.live == 0) FailHeld();
      } else {
        // Fail drops the held cause and its timer.
        SetRankState(job.ranks[static_cast<size_t>(rt.held_cause->rank)], RankState::kKilled);
        Fail(std::move(cause));
      }
    } else if (fence_ == nullptr && LostItsPeer(cause, rr.peer_loss) && rt.live > 0) {
      // It failed because a peer went away (its own words say so): the
      // peer that did is likely still on its way out (a traceback, its
      // interpreter's exit), and its failure is the cause. Wait for it, a
      // while at most. (A multi-node run weighs every node's evidence in
      // its verdict instead: OnRunVerdict.)
      spdlog::info("job={} rank={} lost its peer; waiting up to {} for the rank that failed first",
                   job.id, rank, FormatDuration(kConsequenceWait));
      rt.held_cause = std::move(cause);
      rt.held_timer = clock_.StartTimer(kConsequenceWait, [this, self = std::weak_ptr(attempt_)] {
        if (!Current(self)) return;
        At().held_timer = 0;
        FailHeld();
      });
    } else {
      Fail(std::move(cause));
    }
  }
  if (!failed && rt.held_cause && rt.live == 0) FailHeld();
  if (rr.capturing_stack) {
    // Its output is drained, so its traceback is complete; the end of the
    // investigation takes the job from here.
    return StackCaptured(rank);
  }
  if (rt.live == 0 && rt.phase != Phase::kInvestigating) OnRanksGone();
}

}  // namespace ltd
