// Logging at a bounded rate per job. ltd and every supervisor log as root
// into the system's journal, and what a job makes them say is, in the
// end, up to its user: a rank that toggles its heartbeat mode in a loop,
// or a user who opens and drops streams, must not fill the journal or
// spend root's CPU on it. Lines that begin "job=ID" are counted per job,
// the rest together; past the budget, lines are dropped and counted, and
// the next line let through is preceded by how many were dropped.
// Critical lines always pass.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "spdlog/logger.h"
#include "spdlog/sinks/base_sink.h"

namespace ltd {

struct LogRate {
  double per_second = 0;
  double burst = 0;
};

class RateLimitedSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  using Now = std::function<std::chrono::steady_clock::time_point()>;
  static constexpr LogRate kPerJob{100, 1000};
  static constexpr LogRate kOthers{1000, 10000};
  // At most this many jobs' counts at once; idle ones go first.
  static constexpr size_t kMaxKeys = 1024;

  RateLimitedSink(spdlog::sink_ptr inner, LogRate per_job = kPerJob, LogRate others = kOthers,
                  Now now = &std::chrono::steady_clock::now);

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override;
  void set_pattern_(const std::string& pattern) override;
  void set_formatter_(std::unique_ptr<spdlog::formatter> formatter) override;

 private:
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point at;
    uint64_t dropped = 0;
  };
  // The bucket of `key` with its tokens grown to now.
  Bucket& Refill(const std::string& key, std::chrono::steady_clock::time_point now);
  void SayDropped(const std::string& key, Bucket& b, const spdlog::details::log_msg& like);
  void Forget(std::chrono::steady_clock::time_point now);

  spdlog::sink_ptr inner_;
  const LogRate per_job_;
  const LogRate others_;
  Now now_;
  std::map<std::string, Bucket> buckets_;  // "" for lines of no job
  std::chrono::steady_clock::time_point swept_at_{};
};

// A logger named `name` writing to stderr (colours on a terminal) through
// a RateLimitedSink.
std::shared_ptr<spdlog::logger> RateLimitedStderrLogger(const std::string& name);

}  // namespace ltd
