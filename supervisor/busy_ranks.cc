// Automatic heartbeats, the kernel's side: a rank whose main thread runs
// is busy, not hung. The module in the rank judges progress by sampling
// its main thread's Python frame from a thread of its own, which needs the
// CPU and the GIL the rank lacks on a starved machine: its checks come
// late, or catch the frame at the same instruction every time (the GIL
// changes hands at the same few points of a loop), and a slow but working
// rank looked hung. The kernel's account of the main thread's CPU time
// (/proc/PID/task/PID/stat, read by the supervisor) needs nothing of the
// rank: any CPU used in a quiet spell is progress.
//
// Not progress: CPU used by a rank whose last stack shows it waiting in a
// collective. NCCL's and CUDA's waits may spin; a peer stalled outside
// one is what the verdict must still find.
#include <algorithm>

#include "hang_report.h"
#include "job_runner.h"
#include "spdlog/spdlog.h"

namespace ltd {
namespace {

// The probe runs this often during a quiet spell: CPU used at the end of
// a spell is seen at most this late, so a real hang is found within the
// timeout plus this. A quarter of a short timeout (a test's 200ms) keeps
// the verdict near its timeout there too.
constexpr Millis kMaxProbePeriod{500};
constexpr Millis kMinProbePeriod{50};

}  // namespace

Millis JobRunner::CpuProbePeriod() const {
  return std::clamp(attempt_->auto_timeout / 4, kMinProbePeriod, kMaxProbePeriod);
}

void JobRunner::ArmCpuProbe() {
  LiveAttempt& rt = At();
  if (rt.cpu_probe_timer != 0 || rt.phase != Phase::kRunning) return;
  if (rt.auto_timeout.count() <= 0) return;
  rt.cpu_probe_timer = clock_.StartTimer(CpuProbePeriod(), [this, self = std::weak_ptr(attempt_)] {
    if (!Current(self)) return;
    LiveAttempt& at = At();
    at.cpu_probe_timer = 0;
    if (at.phase != Phase::kRunning) return;
    ProbeCpu();
    // Only while some rank is watched automatically: a job whose ranks
    // beat themselves, or ended, needs no probe.
    for (const RankRuntime& rr : at.ranks) {
      if (rr.Automatic()) return ArmCpuProbe();
    }
  });
}

void JobRunner::ProbeCpu() {
  const Job& job = job_;
  LiveAttempt& rt = At();
  if (!rt.auto_progress) return;
  const Millis now = clock_.Monotonic();
  // While ranks report progress themselves, their CPU says nothing new:
  // marks are read only once the job has been quiet for a probe period,
  // and a spell's first read is only the mark the next one compares with.
  const bool quiet = now - *rt.auto_progress >= CpuProbePeriod();
  int busy = -1;
  for (size_t r = 0; r < rt.ranks.size(); ++r) {
    RankRuntime& rr = rt.ranks[r];
    if (!quiet || !rr.Automatic()) {
      rr.cpu_mark.reset();
      continue;
    }
    const std::optional<uint64_t> ticks = launcher_.MainThreadCpu(job.id, static_cast<int>(r));
    const bool ran = ticks && rr.cpu_mark && *ticks > *rr.cpu_mark;
    rr.cpu_mark = ticks;
    if (!ran || busy >= 0) continue;
    if (!rr.auto_stack.empty() && WaitsInCollective(AutoStackText(rr.auto_stack))) continue;
    busy = static_cast<int>(r);
  }
  if (busy < 0) return;
  spdlog::debug("job={} rank={} main thread used CPU without reporting progress: busy", job.id,
                busy);
  // The armed watchdog finds its deadline moved and sleeps again.
  rt.auto_progress = now;
}

}  // namespace ltd
