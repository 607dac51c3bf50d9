// Prometheus metrics of ltd (--metrics-listen ADDR; off by default). The
// loop thread owns job state, so it alone updates metrics: counters and
// histograms from job events and from the records the jobs' supervisors
// send (an attempt's root cause and end, a hang verdict's missed deadline,
// the restart count: ltd is the one place that sees every job), gauges
// from a look at the jobs at most once per kRefreshInterval after a change. prometheus-cpp's metric
// objects are thread-safe; ltd's own endpoint (metrics_http.h) answers scrapes on a thread of its
// own and only reads them. Labels: state, reason, user (the only unbounded one, bounded by the
// host's users); never a job id.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "clock.h"
#include "job_events.h"
#include "metrics_http.h"

namespace ltd {

class Metrics final : public JobEvents {
 public:
  // Slots by state, from whoever places jobs.
  struct Slots {
    int free = 0;
    int busy = 0;
    int quarantined = 0;
  };
  struct Sources {
    std::function<std::vector<const Job*>()> jobs;  // every job ltd keeps
    std::function<Slots()> slots;
  };
  static constexpr Millis kRefreshInterval{1000};

  // Metrics in a registry, not served (tests read them with Text()).
  Metrics(Clock& clock, Sources sources);
  ~Metrics() override;
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Serves GET /metrics on `listen` ("127.0.0.1:9464", "[::1]:9464", or
  // "9464" for every address; port 0 picks one). Fails with one line.
  absl::Status Serve(const std::string& listen);
  // Where it serves, "" when it does not.
  std::string address() const;

  // The gauges from the jobs now (the loop calls this at start).
  void Refresh();
  // The registry in the text format, as a scrape would get it.
  std::string Text() const;

  void OnSubmitted(const Job&) override { PokeRefresh(); }
  void OnStateChanged(const Job& job, JobState from) override;
  void OnRecord(const Job& before, const Job& now) override;
  void OnOutputLine() override { output_lines_.Increment(); }

 private:
  void PokeRefresh();
  // Sets a labelled gauge per user; users no longer seen lose theirs.
  static void SetPerUser(prometheus::Family<prometheus::Gauge>& family,
                         std::map<std::string, prometheus::Gauge*>& gauges,
                         const std::map<std::string, double>& values);

  Clock& clock_;
  Sources sources_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<MetricsHttp> http_;
  std::string address_;

  prometheus::Family<prometheus::Gauge>& jobs_;
  prometheus::Family<prometheus::Gauge>& user_pending_;
  prometheus::Family<prometheus::Gauge>& user_running_ranks_;
  prometheus::Family<prometheus::Gauge>& slots_;
  prometheus::Family<prometheus::Counter>& ended_;
  prometheus::Counter& restarts_;
  prometheus::Counter& hangs_;
  prometheus::Counter& output_lines_;
  prometheus::Histogram& teardown_seconds_;
  prometheus::Histogram& verdict_seconds_;
  prometheus::Histogram& start_wait_seconds_;
  std::map<std::string, prometheus::Gauge*> pending_by_user_;
  std::map<std::string, prometheus::Gauge*> running_ranks_by_user_;

  Clock::TimerId refresh_timer_ = 0;
  std::optional<Millis> last_refresh_;
};

}  // namespace ltd
