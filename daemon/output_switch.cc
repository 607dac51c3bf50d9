#include "output_switch.h"

#include "spdlog/spdlog.h"

namespace ltd {

void OutputSwitch::NewWatch(bool from_start) {
  ++generation_;
  ready_ = false;
  from_start_ = from_start;
  on_ = true;
  unknown_ = false;
}

OutputSwitch::Actions OutputSwitch::Ask() {
  if (!ready_ || call_ || unsupported_) return {};
  call_ = true;
  return Actions{want_, false};
}

OutputSwitch::Actions OutputSwitch::OnRecord() {
  Actions a;
  // A watch again, with output as wanted: it flows, and what was missed
  // is in the log (nothing, for a watch from the job's start).
  if (!ready_ && want_ && want_ == on_ && !call_) {
    a.resumed = true;
    a.missed = !from_start_;
  }
  ready_ = true;
  if (want_ != on_ || unknown_) a.ask = Ask().ask;
  return a;
}

OutputSwitch::Actions OutputSwitch::Want(bool on) {
  want_ = on;
  // A supervisor of an earlier release: its output never stopped.
  if (unsupported_) return Actions{std::nullopt, on, false};
  if (want_ != on_ || unknown_ || call_) return Ask();
  // It sends output already (a new watch, or an off that never went):
  // nothing to ask, and nothing was missed.
  return Actions{std::nullopt, on, false};
}

OutputSwitch::Actions OutputSwitch::Answered(Answer answer, bool on, uint64_t generation,
                                             std::string_view error) {
  call_ = false;
  // A new watch began meanwhile, with output on: this answer is stale.
  if (generation != generation_) return Ask();
  switch (answer) {
    case Answer::kUnimplemented:
      spdlog::info("job={} its supervisor always sends output (an earlier release)", job_id_);
      unsupported_ = true;
      on_ = true;
      unknown_ = false;
      return Actions{std::nullopt, want_, false};
    case Answer::kFailed:
      // Wedged or gone: its exit or the watch's end will tell. Asked again
      // with its next record; said once.
      if (!unknown_) {
        spdlog::warn("job={} supervisor did not take output {}: {}", job_id_, on ? "on" : "off",
                     error);
      }
      unknown_ = true;
      return {};
    case Answer::kOk:
      break;
  }
  spdlog::debug("job={} supervisor output {}", job_id_, on ? "on" : "off");
  on_ = on;
  unknown_ = false;
  Actions a;
  a.resumed = a.missed = on;
  if (want_ != on_) a.ask = Ask().ask;  // toggled meanwhile: the latest wish
  return a;
}

}  // namespace ltd
