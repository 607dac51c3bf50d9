// A rank of a hang report whose stack was taken (faulthandler's), for the
// tests of hang reports.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "job.h"

namespace ltd::test {

inline HangReportRank TakenRank(int rank, int64_t step, bool stalled, bool in_collective,
                                std::string stack) {
  HangReportRank r;
  r.rank = rank;
  r.last_step = step;
  r.stalled = stalled;
  r.in_collective = in_collective;
  r.stack = std::move(stack);
  r.stack_status = StackStatus::kTaken;
  r.stack_note = "faulthandler";
  return r;
}

}  // namespace ltd::test
