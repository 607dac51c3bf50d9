// The stream of a client's attached submit, attach, logs or wait: live
// output past the bound is dropped, with a notice (`logs` has every line).
#pragma once

#include "ltd.grpc.pb.h"
#include "write_stream.h"

namespace ltd {

struct JobEventTraits {
  static bool Droppable(const v1::JobEvent& event) { return event.has_output(); }
  static v1::JobEvent Notice(uint64_t dropped) {
    v1::JobEvent notice;
    notice.set_notice("ltd: " + std::to_string(dropped) +
                      " output line(s) dropped: the client was too slow");
    return notice;
  }
};

using EventStream = WriteStream<v1::JobEvent, JobEventTraits>;

}  // namespace ltd
