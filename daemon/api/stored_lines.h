// An attach reads its job's output from the log: the stored lines ("TIME
// [R] line", stderr marked in the stamp, "[ltd] ..." ltd's own) become the
// events a client prints, each with the place in the log where it ends, so
// that a client that reconnects goes on from the last line it printed.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ltd.pb.h"

namespace ltd {

// The events of `chunk` (whole stored lines; the last may lack its newline)
// that ends at log position `end`. `log_id` goes with the first event, when
// not 0. `batched`: a run of output lines is one `lines` event (a client
// that asked for them: one write for a chunk's lines, not one per line),
// else each line is an `output` event.
void StoredLinesToEvents(std::string_view chunk, uint64_t end, uint64_t log_id, bool batched,
                         std::vector<v1::JobEvent>* events);

}  // namespace ltd
