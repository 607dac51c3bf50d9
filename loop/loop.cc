#include "loop.h"

#include <cstdlib>
#include <thread>

#include "spdlog/spdlog.h"

namespace ltd {

Loop::Loop() {
  if (int rc = uv_loop_init(&loop_); rc != 0) {
    spdlog::critical("uv_loop_init: {}", uv_strerror(rc));
    std::abort();
  }
  int rc = 0;
  auto async = UvInit<uv_async_t>([&](uv_async_t* h) {
    return rc = uv_async_init(&loop_, h,
                              [](uv_async_t* a) { static_cast<Loop*>(a->data)->Drain(); });
  });
  if (!async) {
    spdlog::critical("uv_async_init: {}", uv_strerror(rc));
    std::abort();
  }
  async->data = this;
  soon_ = UvInit<uv_idle_t>([&](uv_idle_t* h) { return rc = uv_idle_init(&loop_, h); });
  if (!soon_) {
    spdlog::critical("uv_idle_init: {}", uv_strerror(rc));
    std::abort();
  }
  soon_->data = this;
  std::lock_guard lock(mu_);
  async_ = std::move(async);
}

Loop::~Loop() {
  if (loop_closed_) return;
  if (int rc = Close(); rc != 0) {
    spdlog::error("uv_loop_close: {} (a handle leaked)", uv_strerror(rc));
  }
}

int Loop::Close() {
  UvPtr<uv_async_t> async;
  std::vector<std::function<void()>> dropped;
  {
    std::lock_guard lock(mu_);
    async = std::move(async_);
    dropped.swap(queue_);
  }
  // Outside the lock: a closure's destructor may Post (and is dropped).
  dropped.clear();
  async.reset();
  soon_.reset();
  // Let every pending close callback run, then prove nothing leaked.
  uv_run(&loop_, UV_RUN_DEFAULT);
  loop_closed_ = true;
  return uv_loop_close(&loop_);
}

void Loop::Post(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  if (!async_) return;  // closed
  queue_.push_back(std::move(fn));
  if (runner_ == std::this_thread::get_id()) {
    // No system call: the loop's next turn drains the queue, its poll
    // returning at once while soon_ is active.
    uv_idle_start(soon_.get(), [](uv_idle_t* h) { static_cast<Loop*>(h->data)->DrainSoon(); });
    return;
  }
  // Under the lock: Close() cannot free the handle in between.
  uv_async_send(async_.get());
}

int Loop::Run() {
  {
    std::lock_guard lock(mu_);
    runner_ = std::this_thread::get_id();
  }
  const int rc = uv_run(&loop_, UV_RUN_DEFAULT);
  std::lock_guard lock(mu_);
  runner_ = {};
  return rc;
}

void Loop::RunWhile(const std::function<void()>& fn) {
  std::thread worker([&] {
    fn();
    Post([this] { Stop(); });
  });
  Run();
  worker.join();
}

void Loop::Drain() {
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard lock(mu_);
    batch.swap(queue_);
  }
  for (auto& fn : batch) fn();
}

void Loop::DrainSoon() {
  // Stopped first: a closure that posts again starts it again.
  uv_idle_stop(soon_.get());
  Drain();
}

}  // namespace ltd
