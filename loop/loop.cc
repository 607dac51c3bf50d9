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
  async_.data = this;
  uv_async_init(&loop_, &async_, &Loop::OnAsync);
}

Loop::~Loop() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    queue_.clear();
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&async_), nullptr);
  // Let every pending close callback run, then prove nothing leaked.
  uv_run(&loop_, UV_RUN_DEFAULT);
  if (int rc = uv_loop_close(&loop_); rc != 0) {
    spdlog::error("uv_loop_close: {} (a handle leaked)", uv_strerror(rc));
  }
}

void Loop::Post(std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    queue_.push_back(std::move(fn));
  }
  uv_async_send(&async_);
}

int Loop::Run() { return uv_run(&loop_, UV_RUN_DEFAULT); }

void Loop::RunWhile(const std::function<void()>& fn) {
  std::thread worker([&] {
    fn();
    Post([this] { Stop(); });
  });
  Run();
  worker.join();
}

void Loop::OnAsync(uv_async_t* handle) { static_cast<Loop*>(handle->data)->Drain(); }

void Loop::Drain() {
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard lock(mu_);
    batch.swap(queue_);
  }
  for (auto& fn : batch) fn();
}

}  // namespace ltd
