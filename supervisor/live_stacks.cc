// `ltctl stack`: where each rank is now, while the job runs on.
//
//   Python ranks with ltd's module: the rank's main process gets the
//     module's real-time signal (`auto stacksig N`); faulthandler, in C,
//     writes every thread's frames to the rank's stack pipe, which only
//     this supervisor reads. No Python code runs for it, so a main thread
//     that holds the GIL in a collective answers too, and the rank goes on.
//   Other ranks: eu-stack (else gdb) as the job's user (StackSampler).
//   Every rank: the kernel's view of each thread (state, wchan).
//
// A rank that cannot answer says why: stopped or in D state (no handler,
// no tracer runs in it), gone, no module, or the budget ran out.
#include <signal.h>

#include "job_runner.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

// How often the stack pipes are read while a call waits, and how long a
// pipe that gave a dump must stay quiet for the dump to be whole:
// faulthandler writes it in one go from its signal handler.
constexpr Millis kPipePoll{10};
constexpr Millis kQuietAfterDump{30};

}  // namespace

struct JobRunner::StackCall {
  Supervision::StacksDone done;
  Millis started{0};
  Millis deadline{0};
  LiveStacks result;
  // By index into result.ranks: waiting for faulthandler's dump.
  struct Waiting {
    size_t index = 0;
    int rank = 0;
    std::string got;
    Millis last_data{-1};
  };
  std::vector<Waiting> python;
  bool native_pending = false;
  Clock::TimerId timer = 0;
  bool finished = false;
};

void JobRunner::Stacks(std::optional<int> rank, Millis budget, Supervision::StacksDone done) {
  Job& job = job_;
  if (attempt_ == nullptr || job.state != JobState::kRunning || At().phase == Phase::kEnded) {
    return done(absl::FailedPreconditionError(
        Cat("job ", job.id, " is ", ToString(job.state), ": only a running job has stacks")));
  }
  LiveAttempt& rt = At();
  if (rank && (*rank < 0 || static_cast<size_t>(*rank) >= rt.ranks.size())) {
    return done(absl::InvalidArgumentError(
        Cat("job ", job.id, " has ranks 0-", rt.ranks.size() - 1, "; --rank ", *rank, " is none")));
  }
  if (stack_calls_.size() >= kMaxStackCalls) {
    return done(absl::ResourceExhaustedError(
        Cat("stacks of job ", job.id, " are being taken already; try again in a moment")));
  }
  auto call = std::make_shared<StackCall>();
  call->done = std::move(done);
  call->started = clock_.Monotonic();
  call->deadline = call->started + budget;
  std::vector<pid_t> native;
  std::vector<size_t> native_index;
  for (size_t r = 0; r < rt.ranks.size(); ++r) {
    if (rank && static_cast<size_t>(*rank) != r) continue;
    const RankRuntime& rr = rt.ranks[r];
    RankStack s;
    s.rank = static_cast<int>(r);
    s.pid = job.ranks[r].pid;
    const size_t index = call->result.ranks.size();
    const std::optional<StuckProcess> proc =
        rr.alive ? launcher_.Stuck(job.id, s.rank) : std::nullopt;
    if (!proc) {
      s.note = "not running";
      call->result.ranks.push_back(std::move(s));
      continue;
    }
    s.state = StateWords(proc->state);
    s.kernel = launcher_.KernelView(job.id, s.rank);
    const bool stopped = proc->state == 'T' || proc->state == 't';
    if (proc->state == 'D') {
      s.note = Cat("in D state (uninterruptible", proc->wchan.empty() ? "" : ", in ", proc->wchan,
                   "): neither a signal handler nor a tracer can run in it now; the kernel's "
                   "view only");
    } else if (proc->state == 'Z') {
      s.note = "exiting (a zombie): the kernel's view only";
    } else if (rr.stack_signal != 0 && !stopped) {
      // What an earlier call left unread is not this call's answer.
      (void)launcher_.ReadStackPipe(job.id, s.rank);
      launcher_.SignalProcess(job.id, s.rank, rr.stack_signal);
      s.kind = "python";
      call->python.push_back({index, s.rank, "", Millis{-1}});
    } else if (sampler_ == nullptr) {
      s.note = "no stack tool here";
    } else {
      // A stopped Python rank can still be read from outside.
      if (stopped) {
        s.note =
            "stopped: no signal handler runs in it until it is continued; native frames "
            "instead";
      }
      if (!stopped && rr.stack_signal == 0 && sampler_->IsPython(s.pid)) {
        s.note =
            "no Python frames: ltd's automatic-heartbeat module is not in its main process "
            "(--no-auto-heartbeat, a Python started by a shell, or before site ran); native "
            "frames instead";
      }
      native.push_back(s.pid);
      native_index.push_back(index);
      s.kind = "native";
    }
    call->result.ranks.push_back(std::move(s));
  }
  stack_calls_.push_back(call);
  if (!native.empty()) {
    call->native_pending = true;
    std::weak_ptr<StackCall> weak = call;
    // The tools' own budget ends before ours, so their answer is in.
    const Millis tool_budget = std::max(Millis{1}, budget - 2 * kPipePoll);
    sampler_->Sample(native, Credentials{job.spec.uid, job.spec.gid, job.spec.groups}, tool_budget,
                     [this, weak, native_index](std::vector<SampledStack> stacks) {
                       auto c = weak.lock();
                       if (!c || c->finished) return;
                       for (size_t i = 0; i < stacks.size() && i < native_index.size(); ++i) {
                         RankStack& s = c->result.ranks[native_index[i]];
                         SampledStack& got = stacks[i];
                         if (got.outcome == SampledStack::Outcome::kTaken) {
                           // The sampler's text ends with the kernel's view.
                           s.frames = std::move(got.text);
                           s.kernel.clear();
                           continue;
                         }
                         s.kind.clear();
                         s.note = s.note.empty() ? got.note : Cat(s.note, "; ", got.note);
                       }
                       c->native_pending = false;
                       if (c->python.empty()) FinishStacks(c);
                     });
  }
  if (call->finished) return;
  PollStacks(call);
}

void JobRunner::PollStacks(const std::shared_ptr<StackCall>& call) {
  call->timer = 0;
  const Millis now = clock_.Monotonic();
  for (auto it = call->python.begin(); it != call->python.end();) {
    auto got = launcher_.ReadStackPipe(job_.id, it->rank);
    RankStack& s = call->result.ranks[it->index];
    if (!got.ok()) {
      s.note = "it ended before it answered";
      s.kind.clear();
      it = call->python.erase(it);
      continue;
    }
    if (!got->empty()) {
      it->got += *got;
      it->last_data = now;
    }
    const bool whole = it->last_data.count() >= 0 && now - it->last_data >= kQuietAfterDump;
    if (whole || it->got.size() >= ProcessLauncher::kStackPipeBytes) {
      s.frames = std::move(it->got);
      it = call->python.erase(it);
      continue;
    }
    ++it;
  }
  if (call->python.empty() && !call->native_pending) return FinishStacks(call);
  if (now >= call->deadline) {
    for (StackCall::Waiting& w : call->python) {
      RankStack& s = call->result.ranks[w.index];
      if (w.got.empty()) {
        s.kind.clear();
        s.note = Cat("no Python frames within the budget of ",
                     FormatDuration(call->deadline - call->started),
                     ": its handler did not run (the program replaced the handler of signal ",
                     StackSignalOf(w.rank), ", blocks it, or holds a lock faulthandler needs)");
      } else {
        s.frames = std::move(w.got);
        s.note = "the dump was still coming when the budget ran out: its tail is missing";
      }
    }
    call->python.clear();
    for (RankStack& s : call->result.ranks) {
      if (s.kind != "native" || !s.frames.empty()) continue;
      s.kind.clear();
      s.note = Cat(s.note.empty() ? "" : Cat(s.note, "; "), "no native frames within the budget");
    }
    return FinishStacks(call);
  }
  std::weak_ptr<StackCall> weak = call;
  call->timer = clock_.StartTimer(kPipePoll, [this, weak] {
    if (auto c = weak.lock()) PollStacks(c);
  });
}

int JobRunner::StackSignalOf(int rank) {
  if (attempt_ == nullptr || rank < 0 || static_cast<size_t>(rank) >= At().ranks.size()) return 0;
  return At().ranks[static_cast<size_t>(rank)].stack_signal;
}

void JobRunner::FinishStacks(const std::shared_ptr<StackCall>& call) {
  if (call->finished) return;
  call->finished = true;
  if (call->timer != 0) clock_.CancelTimer(call->timer);
  call->timer = 0;
  std::erase(stack_calls_, call);
  call->result.took = clock_.Monotonic() - call->started;
  spdlog::info("job={} stacks of {} rank(s) taken in {}ms", job_.id, call->result.ranks.size(),
               call->result.took.count());
  auto done = std::move(call->done);
  done(std::move(call->result));
}

void JobRunner::CancelStacks() {
  for (const std::shared_ptr<StackCall>& call : std::vector(stack_calls_)) {
    if (call->timer != 0) clock_.CancelTimer(call->timer);
    call->timer = 0;
    call->finished = true;
    auto done = std::move(call->done);
    done(absl::UnavailableError(Cat("job ", job_.id, " ended while its stacks were taken")));
  }
  stack_calls_.clear();
}

}  // namespace ltd
