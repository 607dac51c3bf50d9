// The streaming verbs' side of ltctl: an attached submit, `attach`, `wait`
// and `logs`, each printing the job's events as they come and following
// the job through restarts of ltd.
#pragma once

#include <grpcpp/grpcpp.h>

#include <optional>
#include <string>

#include "connection.h"
#include "ltd.grpc.pb.h"

namespace ltd {

// Follows job `id` (its output, or only its end) to the end, through
// restarts of ltd: a stream that breaks because ltd went away is opened
// again (Attach or Wait) once ltd is back, and the user is told once.
// `first` is the stream already open (an attached submit's, say), `at`
// where in the job's log it starts when its first event said so. Returns
// the job's exit code.
int FollowThroughRestarts(const Globals& g, const std::string& id, bool output, bool quiet_end,
                          grpc::ClientReaderInterface<v1::JobEvent>* first,
                          std::optional<v1::LogPosition> at = std::nullopt);

// `wait` of a whole array (Show's reply with array_tasks): waits for each
// task in turn; returns the highest exit code of its tasks (0 only when
// every one succeeded).
int WaitArray(const Globals& g, const v1::Job& array);

// `ltctl logs`: the stored log, or (`follow`) the log and then the live
// lines until the job ends, through restarts of ltd.
// `filters`: LogsRequest's timestamps and since, copied into every request.
int Logs(const Globals& g, const std::string& job, int rank, bool follow, int64_t tail,
         const v1::LogsRequest& filters);

// Writes out whatever the console holds (before a message of ltctl's own,
// or an exit that skips stdio's).
void FlushConsole();

}  // namespace ltd
