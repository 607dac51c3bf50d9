#include "output_writer.h"

#include <limits.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "bytes.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

namespace {

// Writes all of `iov` (IOV_MAX at a time); 0, or the errno that stopped it.
int WriteAll(int fd, std::vector<iovec>& iov) {
  size_t at = 0;
  while (at < iov.size()) {
    const int count = static_cast<int>(std::min<size_t>(iov.size() - at, IOV_MAX));
    const ssize_t n = writev(fd, &iov[at], count);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    // Past what was written, partly into an iovec maybe.
    size_t done = static_cast<size_t>(n);
    while (at < iov.size() && done >= iov[at].iov_len) done -= iov[at++].iov_len;
    if (done > 0) {
      iov[at].iov_base = static_cast<char*>(iov[at].iov_base) + done;
      iov[at].iov_len -= done;
    }
  }
  return 0;
}

}  // namespace

struct OutputWriter::State {
  struct File {
    Fd fd;
    std::string path;
    uint64_t dropped = 0;  // since the last chunk queued for it
    bool failed = false;
  };
  explicit State(size_t max) : max_queued(max) {}

  const size_t max_queued;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::vector<File> files;  // only appended to before the first Queue
  std::deque<std::pair<size_t, std::string>> queue;
  size_t queued_bytes = 0;
  uint64_t dropped_total = 0;
  bool idle = false;  // the thread waits for chunks
  bool stop = false;
  bool done = false;  // the thread has written everything and returned
};

absl::StatusOr<std::unique_ptr<OutputWriter>> OutputWriter::Create(size_t max_queued_bytes) {
  auto state = std::make_shared<State>(max_queued_bytes);
  try {
    std::thread([state] { Run(state); }).detach();
  } catch (const std::system_error& e) {
    return absl::UnavailableError(Cat("no thread to write --output files: ", e.what()));
  }
  return std::unique_ptr<OutputWriter>(new OutputWriter(std::move(state)));
}

OutputWriter::OutputWriter(std::shared_ptr<State> state) : state_(std::move(state)) {}

OutputWriter::~OutputWriter() {
  std::unique_lock lock(state_->mu);
  state_->stop = true;
  state_->cv.notify_all();
  if (!state_->cv.wait_for(lock, kFlushDeadline, [&] { return state_->done; })) {
    spdlog::warn("--output files took over {} ms to write; {} bytes left unwritten",
                 kFlushDeadline.count(), state_->queued_bytes);
  }
}

size_t OutputWriter::AddFile(Fd fd, std::string path) {
  std::lock_guard lock(state_->mu);
  state_->files.push_back(State::File{std::move(fd), std::move(path)});
  return state_->files.size() - 1;
}

void OutputWriter::Queue(size_t file, std::string_view data) {
  State& s = *state_;
  std::lock_guard lock(s.mu);
  if (file >= s.files.size() || data.empty()) return;
  State::File& f = s.files[file];
  if (f.failed) return;
  if (s.queued_bytes + data.size() > s.max_queued) {
    if (f.dropped == 0) {
      spdlog::warn("output to {} is written too slowly; dropping lines until it catches up",
                   ForLog(f.path));
    }
    f.dropped += data.size();
    s.dropped_total += data.size();
    return;
  }
  std::string chunk;
  if (f.dropped > 0) {
    chunk = Cat("ltd: ", f.dropped,
                " bytes of output dropped here: this file was written too slowly\n");
    f.dropped = 0;
  }
  chunk.append(data);
  s.queued_bytes += chunk.size();
  s.queue.emplace_back(file, std::move(chunk));
  if (s.idle) s.cv.notify_all();
}

uint64_t OutputWriter::dropped() const {
  std::lock_guard lock(state_->mu);
  return state_->dropped_total;
}

void OutputWriter::Run(const std::shared_ptr<State>& state) {
  State& s = *state;
  std::unique_lock lock(s.mu);
  for (;;) {
    s.idle = true;
    s.cv.wait(lock, [&] { return s.stop || !s.queue.empty(); });
    s.idle = false;
    if (s.queue.empty()) break;  // stopped, and all written
    if (!s.stop) {
      // A burst's chunks gather meanwhile, and go out in one write a file:
      // a rank that flushes every line would cost a wakeup and a write a line.
      lock.unlock();
      std::this_thread::sleep_for(kBatchDelay);
      lock.lock();
    }
    std::deque<std::pair<size_t, std::string>> batch;
    batch.swap(s.queue);
    // Each file's chunks, in order, in one writev. Fds and paths are read
    // here only: files is not resized once chunks are queued.
    std::map<size_t, std::vector<iovec>> writes;
    std::vector<std::pair<int, std::string>> targets(s.files.size());  // fd, path
    size_t bytes = 0;
    for (auto& [file, chunk] : batch) {
      bytes += chunk.size();
      const State::File& f = s.files[file];
      if (f.failed) continue;
      targets[file] = {f.fd.get(), f.path};
      writes[file].push_back(iovec{chunk.data(), chunk.size()});
    }
    lock.unlock();
    std::vector<std::pair<size_t, int>> failed;  // file, errno
    for (auto& [file, iov] : writes) {
      if (int err = WriteAll(targets[file].first, iov); err != 0) failed.emplace_back(file, err);
    }
    lock.lock();
    s.queued_bytes -= bytes;
    for (const auto& [file, err] : failed) {
      State::File& f = s.files[file];
      if (f.failed) continue;
      f.failed = true;
      spdlog::warn("output to {} stopped: write: {}", ForLog(f.path), std::strerror(err));
    }
  }
  s.done = true;
  s.cv.notify_all();
}

}  // namespace ltd
