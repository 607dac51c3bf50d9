// Appends to a job's --output files on a thread of its own. The files are
// the user's, on a file system the user chose: an NFS server that stops
// answering or a FUSE mount can leave a write waiting for ever, and that
// must stall this thread only, never the supervisor's loop (its watchdogs,
// its teardown). Chunks wait in a queue of at most kMaxQueuedBytes; past it
// a chunk is dropped, and the next one written to that file is preceded by
// a line saying how much was lost there. What arrives within kBatchDelay
// goes out in one write a file. A file that refuses a write (a
// full disk) gets nothing more; that is logged once.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "fd.h"

namespace ltd {

class OutputWriter {
 public:
  static absl::StatusOr<std::unique_ptr<OutputWriter>> Create(
      size_t max_queued_bytes = kMaxQueuedBytes);
  // Gives the thread kFlushDeadline to write what is queued, then leaves
  // it to finish on its own (a file system that does not answer).
  ~OutputWriter();
  OutputWriter(const OutputWriter&) = delete;
  OutputWriter& operator=(const OutputWriter&) = delete;

  // A file to append to; its index for Queue. Before the first Queue.
  size_t AddFile(Fd fd, std::string path);
  // Queues `data` for file `file`; never blocks on the file.
  void Queue(size_t file, std::string_view data);

  // Bytes dropped so far, for every file (tests, the bench).
  uint64_t dropped() const;

  static constexpr size_t kMaxQueuedBytes = 16 << 20;
  static constexpr std::chrono::milliseconds kFlushDeadline{2000};
  // How long a burst of chunks gathers before it is written.
  static constexpr std::chrono::milliseconds kBatchDelay{1};

 private:
  struct State;  // shared with the thread, which may outlive this
  explicit OutputWriter(std::shared_ptr<State> state);
  static void Run(const std::shared_ptr<State>& state);
  std::shared_ptr<State> state_;
};

}  // namespace ltd
