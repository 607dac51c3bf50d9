#include "dir_remover.h"

#include <filesystem>

#include "spdlog/spdlog.h"

namespace ltd {

DirRemover::~DirRemover() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DirRemover::Remove(std::string path) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(path));
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  }
  cv_.notify_all();
}

void DirRemover::Drain() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return (queue_.empty() && !busy_) || stop_; });
}

void DirRemover::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    std::string path = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (ec) spdlog::warn("remove {}: {}", path, ec.message());
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace ltd
