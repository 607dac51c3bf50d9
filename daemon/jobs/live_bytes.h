// What the live jobs' dirs take in the state dir, per user, for
// --max-state-bytes (state_budget.cc), at a cost that does not grow with
// the queue. A waiting job's dir holds its record and nothing else writes
// there until it starts, so it is measured once, when it starts to wait;
// the dirs of placed jobs grow with their logs and are measured again when
// asked, at most once per kRemeasure or when one is placed or ends (a
// submit's check sees their logs as of up to that long ago; each log has
// its own bound, --job-max-log-bytes).
//
// Bookkeeping only: the job table says which jobs wait and measures dirs.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "finished_jobs.h"

namespace ltd {

class LiveBytes {
 public:
  static constexpr std::chrono::milliseconds kRemeasure{1000};

  // Job `id` of `uid` waits (queued, or after other jobs) and its dir
  // takes `bytes`. Again for the same id: measured anew.
  void Waiting(const std::string& id, uid_t uid, uint64_t bytes);
  // It no longer waits (placed, or ended); harmless when it never did.
  void NotWaiting(const std::string& id);
  // A job was placed or ended: the placed jobs are measured again at the
  // next Total (an ended job's dir counts among the finished ones now,
  // never twice).
  void PlacedChanged() { placed_at_.reset(); }
  // Per user: the waiting jobs' bytes, plus the placed jobs' as
  // `measure_placed` last returned them, called again when that was
  // kRemeasure or more before `now` (or never).
  FinishedJobs::Usage Total(std::chrono::milliseconds now,
                            const std::function<FinishedJobs::Usage()>& measure_placed);

  size_t waiting() const { return waiting_.size(); }

 private:
  struct Entry {
    uid_t uid;
    uint64_t bytes;
  };
  std::map<std::string, Entry, std::less<>> waiting_;
  FinishedJobs::Usage waiting_usage_;
  FinishedJobs::Usage placed_usage_;
  std::optional<std::chrono::milliseconds> placed_at_;
};

}  // namespace ltd
