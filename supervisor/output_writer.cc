#include "output_writer.h"

#include <limits.h>
#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "bytes.h"
#include "protocol.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {

using Clock = std::chrono::steady_clock;

struct OutputWriter::State {
  struct File {
    std::string path;
    uint64_t dropped = 0;  // since the last chunk queued for it

    // The line that tells the bytes dropped since the last chunk, counted
    // as told; empty when none were.
    std::string TakeDroppedNotice() {
      if (dropped == 0) return "";
      std::string line = Cat("ltd: ", dropped,
                             " bytes of output dropped here: this file was written too slowly\n");
      dropped = 0;
      return line;
    }
  };
  State(size_t max, std::unique_ptr<UserFileSink> s) : max_queued(max), sink(std::move(s)) {}

  const size_t max_queued;
  std::unique_ptr<UserFileSink> sink;  // the thread's alone
  mutable std::mutex mu;
  std::condition_variable cv;
  std::vector<File> files;
  std::deque<std::pair<size_t, std::string>> queue;
  size_t queued_bytes = 0;
  uint64_t dropped_total = 0;
  bool idle = false;  // the thread waits for chunks
  bool stop = false;
  Clock::time_point flush_deadline;  // set with stop
  bool broken = false;               // the helper is gone: nothing more is queued
  bool done = false;                 // the thread has returned
  uint64_t unwritten = 0;            // bytes the helper never got
};

namespace {

// Writes all of `iov` to the non-blocking `fd`, waiting for room until
// `give_up()`; 0, or the errno that stopped it (ETIMEDOUT: gave up).
template <typename GiveUp>
int PushAll(int fd, std::vector<iovec>& iov, GiveUp give_up) {
  size_t at = 0;
  while (at < iov.size()) {
    const int count = static_cast<int>(std::min<size_t>(iov.size() - at, IOV_MAX));
    const ssize_t n = writev(fd, &iov[at], count);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      if (give_up()) return ETIMEDOUT;
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 50);  // a look at the deadline at least this often
      continue;
    }
    if (n <= 0) return n < 0 ? errno : EIO;
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

absl::StatusOr<std::unique_ptr<OutputWriter>> OutputWriter::Create(
    std::unique_ptr<UserFileSink> sink, std::vector<std::string> paths, size_t max_queued_bytes) {
  auto state = std::make_shared<State>(max_queued_bytes, std::move(sink));
  for (std::string& p : paths) state->files.push_back(State::File{std::move(p)});
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
  // Drops that no later chunk told of are told at the file's end (a line
  // a file, over the bound).
  for (size_t i = 0; i < state_->files.size() && !state_->broken; ++i) {
    std::string notice = state_->files[i].TakeDroppedNotice();
    if (notice.empty()) continue;
    state_->queued_bytes += notice.size();
    state_->queue.emplace_back(i, std::move(notice));
  }
  state_->stop = true;
  state_->flush_deadline = Clock::now() + kFlushDeadline;
  state_->cv.notify_all();
  // The thread gives up by the deadline itself (nothing it does blocks):
  // the margin is for a loaded machine's scheduling.
  state_->cv.wait_for(lock, kFlushDeadline + std::chrono::milliseconds(500),
                      [&] { return state_->done; });
  if (state_->unwritten > 0) {
    spdlog::warn("--output files took over {} ms to write; {} bytes left unwritten",
                 kFlushDeadline.count(), state_->unwritten);
  }
}

void OutputWriter::Queue(size_t file, std::string_view data) {
  State& s = *state_;
  std::lock_guard lock(s.mu);
  if (file >= s.files.size() || data.empty() || s.broken) return;
  State::File& f = s.files[file];
  if (s.queued_bytes + data.size() > s.max_queued) {
    if (f.dropped == 0) {
      spdlog::warn("output to {} is written too slowly; dropping lines until it catches up",
                   ForLog(f.path));
    }
    f.dropped += data.size();
    s.dropped_total += data.size();
    return;
  }
  std::string chunk = f.TakeDroppedNotice();
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
  const int fd = s.sink->fd();
  std::vector<userio::FrameHeader> headers;
  std::vector<iovec> iov;
  std::unique_lock lock(s.mu);
  for (;;) {
    s.idle = true;
    s.cv.wait(lock, [&] { return s.stop || !s.queue.empty(); });
    s.idle = false;
    if (s.queue.empty()) break;  // stopped, and all handed over
    if (!s.stop) {
      // A burst's chunks gather meanwhile, and go out in one write: a rank
      // that flushes every line would cost a wakeup and a write a line.
      lock.unlock();
      std::this_thread::sleep_for(kBatchDelay);
      lock.lock();
    }
    std::deque<std::pair<size_t, std::string>> batch;
    batch.swap(s.queue);
    lock.unlock();
    // Frames of at most kMaxFrame, each a header and a slice of a chunk.
    headers.clear();
    iov.clear();
    size_t bytes = 0;
    for (const auto& [file, chunk] : batch) {
      bytes += chunk.size();
      for (size_t at = 0; at < chunk.size(); at += userio::kMaxFrame) {
        const size_t len = std::min(chunk.size() - at, userio::kMaxFrame);
        headers.push_back(
            userio::FrameHeader{static_cast<uint32_t>(file), static_cast<uint32_t>(len)});
      }
    }
    size_t h = 0;
    for (const auto& [file, chunk] : batch) {
      for (size_t at = 0; at < chunk.size(); at += userio::kMaxFrame) {
        const size_t len = std::min(chunk.size() - at, userio::kMaxFrame);
        iov.push_back(iovec{&headers[h++], sizeof(userio::FrameHeader)});
        iov.push_back(iovec{const_cast<char*>(chunk.data()) + at, len});
      }
    }
    const int err = PushAll(fd, iov, [&] {
      std::lock_guard l(s.mu);
      return s.stop && Clock::now() >= s.flush_deadline;
    });
    lock.lock();
    s.queued_bytes -= bytes;
    if (err != 0) {
      // Given up at the deadline, or the helper is gone (EPIPE: killed,
      // or it failed): what is left is never written.
      for (const auto& [file, chunk] : s.queue) s.unwritten += chunk.size();
      s.unwritten += bytes;  // some of it went; the count says "up to"
      s.queued_bytes = 0;
      s.queue.clear();
      s.broken = true;
      if (err != ETIMEDOUT)
        spdlog::warn("--output files stopped: write to lt-userio: {}", std::strerror(err));
      break;
    }
  }
  const Clock::time_point deadline = s.stop ? s.flush_deadline : Clock::now();
  lock.unlock();
  s.sink->Finish(deadline);
  lock.lock();
  s.done = true;
  s.cv.notify_all();
}

}  // namespace ltd
