// Reading a stream of job events so that the reader knows when nothing
// more has come: a thread of its own blocks in gRPC's Read while the
// caller's thread handles what arrived, and is told when it has handled
// everything there is (so that the console flushes, and output is live in
// a pipe or a file, without a write per line).
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>

#include <chrono>
#include <functional>

#include "ltd.pb.h"

namespace ltd {

// Handles every event of `reader` in order with `on_event`, calls `on_idle`
// whenever no further event is in hand, and returns the stream's status.
// An event that comes after a quiet moment is handled and followed by
// on_idle at once; while events stream in, on_idle runs once per
// kIdleFlushWindow at most, so a stream of lines costs a write per window,
// not per line, and no line waits longer than the window.
// At most kMaxQueued events wait between the two threads: a handler that
// falls behind slows the reading, and ltd drops output (with a notice)
// rather than queue without bound.
inline constexpr size_t kMaxQueuedEvents = 4096;
inline constexpr std::chrono::milliseconds kIdleFlushWindow{2};
grpc::Status PumpEvents(grpc::ClientReaderInterface<v1::JobEvent>& reader,
                        const std::function<void(const v1::JobEvent&)>& on_event,
                        const std::function<void()>& on_idle);

}  // namespace ltd
