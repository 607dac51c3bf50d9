// A job's --output and --error files: opened once per attempt by a helper
// that became the job's user (process/user_files.h), then every line a
// rank writes is also appended there by that helper, as sbatch's -o/-e,
// fed from a thread of their own (output_writer.h). Without
// %r the ranks share a file, each line after "[R] "; with it, each rank's
// file holds its lines as written.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "job.h"
#include "output_writer.h"
#include "process.h"
#include "user_files.h"

namespace ltd {

class OutputFiles {
 public:
  // Every rank's files of `job` (spec.output, spec.error), each path opened
  // once through `user` (nullptr: this process cannot, and says so);
  // `truncate`: cut them to empty (the job's first attempt). Waits at most
  // kFileDeadline for the user's file system. The error names the flag and
  // the file, in one line.
  static absl::StatusOr<OutputFiles> Open(const Job& job, bool truncate, UserFiles* user);
  // Checks spec.output and spec.error as the job's user where the file's
  // place is known before the job has an id (its directory holds no %):
  // a path the user may not write is refused at submit, in one line, not
  // when the job starts. Blocking (NSS, the helper's answer): not on a loop.
  static absl::Status Check(const JobSpec& spec, UserFiles& user);
  // Whether Check has a file to check (and so may wait on the user's file
  // system); false: Check returns OK at once.
  static bool NeedsCheck(const JobSpec& spec);

  // `stored`: the chunk's lines as the job's log keeps them, each after a
  // prefix of `prefix_bytes` (its stamp and "[R] "). Queued to the writer
  // thread: never blocks on the file.
  void Write(int rank, Stream stream, std::string_view stored, size_t prefix_bytes);
  // Bytes the writer dropped, its queue full (the bench).
  uint64_t dropped() const { return writer_ != nullptr ? writer_->dropped() : 0; }

 private:
  static constexpr size_t kNoFile = ~size_t{0};
  struct Target {
    size_t file = kNoFile;  // the writer's; kNoFile: none for this rank and stream
    bool prefixed = false;  // ranks share it: keep "[R] "
  };
  std::unique_ptr<OutputWriter> writer_;
  std::vector<Target> out_, err_;  // by rank
  std::string buf_;
};

}  // namespace ltd
