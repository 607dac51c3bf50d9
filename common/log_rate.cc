#include "log_rate.h"

#include <algorithm>
#include <string_view>

#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_color_sinks.h"

namespace ltd {

namespace {

// "job=ID" when the line begins so, else "".
std::string KeyOf(std::string_view payload) {
  constexpr std::string_view kJob = "job=";
  if (payload.substr(0, kJob.size()) != kJob) return "";
  const size_t end = payload.find_first_of(" :", kJob.size());
  return std::string(payload.substr(0, std::min<size_t>(end, 64)));
}

}  // namespace

RateLimitedSink::RateLimitedSink(spdlog::sink_ptr inner, LogRate per_job, LogRate others, Now now)
    : inner_(std::move(inner)), per_job_(per_job), others_(others), now_(std::move(now)) {}

RateLimitedSink::Bucket& RateLimitedSink::Refill(const std::string& key,
                                                 std::chrono::steady_clock::time_point now) {
  const LogRate& rate = key.empty() ? others_ : per_job_;
  auto [it, fresh] = buckets_.try_emplace(key, Bucket{rate.burst, now, 0});
  Bucket& b = it->second;
  if (!fresh) {
    const double secs = std::chrono::duration<double>(now - b.at).count();
    b.tokens = std::min(rate.burst, b.tokens + std::max(secs, 0.0) * rate.per_second);
    b.at = now;
  }
  return b;
}

void RateLimitedSink::SayDropped(const std::string& key, Bucket& b,
                                 const spdlog::details::log_msg& like) {
  const LogRate& rate = key.empty() ? others_ : per_job_;
  const std::string text = (key.empty() ? std::string() : key + " ") + std::to_string(b.dropped) +
                           " log line(s) dropped: over " +
                           std::to_string(static_cast<int>(rate.per_second)) + " a second";
  spdlog::details::log_msg said(like.time, like.source, like.logger_name, spdlog::level::warn,
                                text);
  inner_->log(said);
  b.dropped = 0;
}

void RateLimitedSink::Forget(std::chrono::steady_clock::time_point now) {
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    const LogRate& rate = it->first.empty() ? others_ : per_job_;
    const double secs = std::chrono::duration<double>(now - it->second.at).count();
    const bool idle =
        it->second.dropped == 0 && it->second.tokens + secs * rate.per_second >= rate.burst;
    it = idle ? buckets_.erase(it) : std::next(it);
  }
}

void RateLimitedSink::sink_it_(const spdlog::details::log_msg& msg) {
  if (msg.level >= spdlog::level::critical) {
    inner_->log(msg);
    return;
  }
  const auto now = now_();
  const std::string key = KeyOf(std::string_view(msg.payload.data(), msg.payload.size()));
  const bool known = buckets_.contains(key);
  // A full table is swept for idle jobs at most once a second: a sweep
  // walks all of it.
  if (!known && buckets_.size() >= kMaxKeys && now - swept_at_ >= std::chrono::seconds(1)) {
    swept_at_ = now;
    Forget(now);
  }
  if (!known && buckets_.size() >= kMaxKeys) {
    // Every job busy at once: the lines of a job not counted yet share the
    // count of lines of no job.
    Bucket& shared = Refill("", now);
    if (shared.tokens < 1) {
      ++shared.dropped;
      return;
    }
    shared.tokens -= 1;
    inner_->log(msg);
    return;
  }
  Bucket& b = Refill(key, now);
  if (b.tokens < 1) {
    ++b.dropped;
    return;
  }
  b.tokens -= 1;
  if (b.dropped > 0) SayDropped(key, b, msg);
  inner_->log(msg);
}

void RateLimitedSink::flush_() {
  for (auto& [key, b] : buckets_) {
    if (b.dropped == 0) continue;
    spdlog::details::log_msg like("", spdlog::level::warn, "");
    SayDropped(key, b, like);
  }
  inner_->flush();
}

void RateLimitedSink::set_pattern_(const std::string& pattern) { inner_->set_pattern(pattern); }

void RateLimitedSink::set_formatter_(std::unique_ptr<spdlog::formatter> formatter) {
  inner_->set_formatter(std::move(formatter));
}

std::shared_ptr<spdlog::logger> RateLimitedStderrLogger(const std::string& name) {
  auto sink =
      std::make_shared<RateLimitedSink>(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  return std::make_shared<spdlog::logger>(name, std::move(sink));
}

}  // namespace ltd
