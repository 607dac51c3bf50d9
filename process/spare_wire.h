// What ltd and a spare supervisor say over the spare's socket (its fd 4,
// a SOCK_SEQPACKET pair): ltd gives it a job, "<job id>\n" with the job's
// connection to ltd (SCM_RIGHTS), and a supervisor done with its job, and
// clean of it, says "free\n" to be given another. EOF either way: the
// other is gone. One message a word, so neither reads a half.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "fd.h"

namespace ltd {

// A job id is a uint64 in decimal.
inline constexpr size_t kMaxJobIdDigits = 20;

struct AssignedJob {
  std::string id;
  Fd connection;  // to ltd, close-on-exec
};

// ltd: gives the supervisor at `spare` job `id`, with `connection`.
absl::Status SendJob(int spare, const std::string& id, int connection);
// The supervisor: waits for its job. nullopt on EOF (ltd let it go, or is
// gone) and on anything but one id and one connection.
std::optional<AssignedJob> ReceiveJob(int spare);

// The supervisor: free for another job; false once ltd is gone.
bool SendFree(int spare);
// ltd: what the supervisor at `spare` said, once it is readable.
enum class SpareWord { kNothingYet, kFree, kGone };
SpareWord ReadSpareWord(int spare);

}  // namespace ltd
