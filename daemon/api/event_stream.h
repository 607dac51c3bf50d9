// The stream of a client's attached submit, attach, logs or wait. Nothing
// is dropped: output comes from the job's log (LogReplay), read only while
// the queue has room, so a slow client lags rather than loses lines.
#pragma once

#include "ltd.grpc.pb.h"
#include "write_stream.h"

namespace ltd {

struct JobEventTraits {
  static bool Droppable(const v1::JobEvent&) { return false; }
  static v1::JobEvent Notice(uint64_t) { return {}; }  // never: nothing is dropped
  // A run of lines costs what as many `output` events would: memory, not
  // only wire bytes (each line is a message and a string of its own).
  static size_t Parts(const v1::JobEvent& event) {
    return event.has_lines() ? static_cast<size_t>(event.lines().lines_size()) : 0;
  }
};

using EventStream = WriteStream<v1::JobEvent, JobEventTraits>;

}  // namespace ltd
