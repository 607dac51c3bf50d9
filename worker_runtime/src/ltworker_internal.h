// Hooks into the C API's process-wide state, for tests only.
#ifndef LTWORKER_SRC_LTWORKER_INTERNAL_H_
#define LTWORKER_SRC_LTWORKER_INTERNAL_H_

namespace ltworker::internal {

// Forgets what LT_HEARTBEAT_FD said, so the next call reads it again. Not
// safe while other threads use the C API.
void ResetHeartbeatForTesting();

}  // namespace ltworker::internal

#endif  // LTWORKER_SRC_LTWORKER_INTERNAL_H_
