#include "event_pump.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace ltd {
namespace {

using Clock = std::chrono::steady_clock;

// While events stream in, the handler is woken once per this many of them
// at most (or at the end of a coalescing window), not once per event.
constexpr size_t kWakeBatch = 256;

}  // namespace

grpc::Status PumpEvents(grpc::ClientReaderInterface<v1::JobEvent>& reader,
                        const std::function<void(const v1::JobEvent&)>& on_event,
                        const std::function<void()>& on_idle) {
  std::mutex mu;
  std::condition_variable arrived, room;
  std::deque<v1::JobEvent> queue;  // guarded by mu
  bool done = false;               // guarded by mu: Read returned false
  // Guarded by mu: the queue size that wakes the handler; 0 while it is
  // busy (it looks at the queue itself when it is done with a batch).
  size_t wake_at = 0;
  // Events the handler is done with go back to this thread, which made
  // them, to be freed here: memory freed by the thread that allocated it
  // stays in that thread's malloc cache, and costs no lock.
  std::deque<v1::JobEvent> handled;  // guarded by mu
  std::thread reading([&] {
    v1::JobEvent ev;
    std::deque<v1::JobEvent> to_free;
    while (reader.Read(&ev)) {
      {
        std::unique_lock lock(mu);
        room.wait(lock, [&] { return queue.size() < kMaxQueuedEvents; });
        queue.push_back(std::move(ev));
        if (wake_at != 0 && queue.size() >= wake_at) {
          wake_at = 0;
          arrived.notify_one();
        }
        to_free.swap(handled);
      }
      to_free.clear();
    }
    std::lock_guard lock(mu);
    done = true;
    arrived.notify_one();
  });
  std::deque<v1::JobEvent> batch;
  auto flushed_at = Clock::now() - kIdleFlushWindow;
  for (;;) {
    {
      std::unique_lock lock(mu);
      while (queue.empty() && !done) {
        const auto now = Clock::now();
        if (now - flushed_at >= kIdleFlushWindow) {
          // Quiet for a window: what is held goes out now, and the next
          // event wakes the handler at once.
          lock.unlock();
          on_idle();
          flushed_at = Clock::now();
          lock.lock();
          if (!queue.empty() || done) break;
          wake_at = 1;
          arrived.wait(lock, [&] { return !queue.empty() || done; });
        } else {
          // Flushed moments ago and events keep coming: gather them until
          // the window ends (or a batch is in), then flush once for all.
          wake_at = kWakeBatch;
          arrived.wait_until(lock, flushed_at + kIdleFlushWindow,
                             [&] { return queue.size() >= kWakeBatch || done; });
          if (!queue.empty()) break;
        }
      }
      wake_at = 0;
      if (queue.empty()) break;  // done, and all of it handled
      batch.swap(queue);
      room.notify_one();
    }
    for (const v1::JobEvent& ev : batch) on_event(ev);
    std::lock_guard lock(mu);
    if (handled.empty()) {
      handled.swap(batch);
    } else {
      for (v1::JobEvent& ev : batch) handled.push_back(std::move(ev));
      batch.clear();
    }
  }
  reading.join();
  on_idle();
  return reader.Finish();
}

}  // namespace ltd
