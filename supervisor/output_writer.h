// Feeds a job's --output files to the helper that writes them as the user
// (process/user_files.h) from a thread of its own. The files are the
// user's, on a file system the user chose: an NFS server that stops
// answering or a FUSE mount can leave the helper waiting for ever, its pipe
// full, and that must stall this thread only, never the supervisor's loop
// (its watchdogs, its teardown); the pipe is non-blocking, so not even this
// thread waits past the flush deadline. Chunks wait in a queue of at most
// kMaxQueuedBytes; past it a chunk is dropped, and the next one for that
// file is preceded by a line saying how much was lost there (or, when no
// chunk came after, the file ends with that line). What arrives within
// kBatchDelay goes to the helper in one write.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "user_files.h"

namespace ltd {

class OutputWriter {
 public:
  // `paths`: the sink's files, by index (for what the log says).
  static absl::StatusOr<std::unique_ptr<OutputWriter>> Create(
      std::unique_ptr<UserFileSink> sink, std::vector<std::string> paths,
      size_t max_queued_bytes = kMaxQueuedBytes);
  // Gives the thread and the helper kFlushDeadline to write what is
  // queued; the helper is killed and left past it.
  ~OutputWriter();
  OutputWriter(const OutputWriter&) = delete;
  OutputWriter& operator=(const OutputWriter&) = delete;

  // Queues `data` for file `file`; never blocks on the file.
  void Queue(size_t file, std::string_view data);

  // Bytes dropped so far, for every file (tests, the bench).
  uint64_t dropped() const;

  static constexpr size_t kMaxQueuedBytes = 16 << 20;
  static constexpr std::chrono::milliseconds kFlushDeadline{2000};
  // How long a burst of chunks gathers before it is written.
  static constexpr std::chrono::milliseconds kBatchDelay{1};

 private:
  struct State;  // shared with the thread
  explicit OutputWriter(std::shared_ptr<State> state);
  static void Run(const std::shared_ptr<State>& state);
  std::shared_ptr<State> state_;
};

}  // namespace ltd
