// What happens to jobs, told to whoever watches ltd from outside (systemd's
// STATUS=, Prometheus metrics) without those watchers living inside the
// job table. Called on the loop thread, in the middle of the table's work:
// a listener reads what it is given, never calls back into the table, and
// defers anything costly (a timer) to a later loop turn.
#pragma once

#include <optional>
#include <string>

#include "job.h"

namespace ltd {

class JobEvents {
 public:
  virtual ~JobEvents() = default;
  // A job was queued (it is PENDING).
  virtual void OnSubmitted(const Job& job) { (void)job; }
  // job.state is the new state; `from` the one before.
  virtual void OnStateChanged(const Job& job, JobState from) {
    (void)job;
    (void)from;
  }
  // A placed job's supervisor sent its record: what ltd had, and what it
  // has now (before OnStateChanged, when the state changed too). What
  // happened in between (an attempt torn down, a hang verdict, a restart)
  // is in the difference; records may coalesce several changes.
  virtual void OnRecord(const Job& before, const Job& now) {
    (void)before;
    (void)now;
  }
  // A line of a job's output reached ltd from its supervisor (which sends
  // them only while a client attaches to or follows the job).
  virtual void OnOutputLine() {}
  // ltd was drained (`reason`, "" for none given) or resumed (nullopt).
  virtual void OnDrainChanged(const std::optional<std::string>& reason) { (void)reason; }
  // A job ended with ranks that would not die (Job::unkillable); its
  // devices stay out of use until they are gone.
  virtual void OnUnkillable(const Job& job) { (void)job; }
  // The last of them is gone: its devices are back in use.
  virtual void OnUnkillableGone(const std::string& job_id) { (void)job_id; }
};

}  // namespace ltd
