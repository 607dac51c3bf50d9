// Whether a supervisor sends its job's output lines on the Watch stream:
// what the job table wants, what the supervisor does as far as ltd knows,
// and the one SetOutput call that carries the latest wish. A small state
// machine with no gRPC in it: its owner (ShimLink) makes the calls it asks
// for and feeds back their answers, so it is tested on its own.
//
// Each watch starts with output on (the supervisor's default); the wish is
// said once the watch has brought its first record, so that the switch
// cannot overtake the watch. Toggles coalesce: one call at a time, and
// when it is answered, the latest wish if it differs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ltd {

class OutputSwitch {
 public:
  explicit OutputSwitch(std::string job_id) : job_id_(std::move(job_id)) {}

  // What the owner is to do now.
  struct Actions {
    // Call SetOutput(on) under generation(); answer with Answered.
    std::optional<bool> ask;
    // Tell the job table output flows again (every later line comes on
    // the stream, every earlier one is in the log).
    bool resumed = false;
    // With `resumed`: lines may have gone to the log alone meanwhile (the
    // supervisor had output off, or no watch carried it), which its
    // readers look for there. Without: none did (it never stopped).
    bool missed = false;
  };
  enum class Answer { kOk, kUnimplemented, kFailed };

  // A watch begins: the supervisor sends output, until told otherwise.
  // `from_start`: it begins before the job's first line (a supervisor
  // starts its job once watched), so no line can have gone to the log
  // alone before it.
  void NewWatch(bool from_start = false);
  // A record came on the current watch (the first: the watch is ready).
  Actions OnRecord();
  // The job table wants output lines (or not).
  Actions Want(bool on);
  // The answer to the SetOutput(on) asked under `generation`; `error`
  // says why it failed.
  Actions Answered(Answer answer, bool on, uint64_t generation, std::string_view error = "");

  uint64_t generation() const { return generation_; }
  bool want() const { return want_; }
  // Whether the supervisor sends output lines, as far as ltd knows.
  bool on() const { return on_; }
  bool call_in_flight() const { return call_; }
  bool unsupported() const { return unsupported_; }

 private:
  // The wish, if it is the moment to say it.
  Actions Ask();

  const std::string job_id_;
  bool want_ = true;
  bool on_ = true;
  bool unknown_ = false;      // a SetOutput failed: say it again
  bool ready_ = false;        // the current watch brought a record
  bool from_start_ = false;   // the current watch began before any line
  bool call_ = false;         // a SetOutput call is in flight
  bool unsupported_ = false;  // a supervisor of a release before SetOutput
  uint64_t generation_ = 0;
};

}  // namespace ltd
