#include "metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>

#include "job_manager.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

constexpr JobState kStates[] = {JobState::kPending,   JobState::kStarting, JobState::kRunning,
                                JobState::kSucceeded, JobState::kFailed,   JobState::kCancelled,
                                JobState::kLost,      JobState::kTimeout,  JobState::kOutOfMemory,
                                JobState::kNodeFail};

double Seconds(Millis d) { return std::max<double>(0, static_cast<double>(d.count()) / 1000.0); }

}  // namespace

Metrics::Metrics(Clock& clock, Sources sources)
    : clock_(clock),
      sources_(std::move(sources)),
      registry_(std::make_shared<prometheus::Registry>()),
      jobs_(BuildGauge()
                .Name("ltd_jobs")
                .Help("Jobs ltd keeps, by state (finished ones until --keep-jobs drops them)")
                .Register(*registry_)),
      user_pending_(BuildGauge()
                        .Name("ltd_user_pending_jobs")
                        .Help("Jobs waiting for devices, per user")
                        .Register(*registry_)),
      user_running_ranks_(BuildGauge()
                              .Name("ltd_user_running_ranks")
                              .Help("Ranks running, per user")
                              .Register(*registry_)),
      slots_(BuildGauge()
                 .Name("ltd_slots")
                 .Help("Device slots by state: free, busy (a job holds it), quarantined")
                 .Register(*registry_)),
      ended_(BuildCounter()
                 .Name("ltd_jobs_ended_total")
                 .Help("Jobs ended, by final state and root-cause reason (none: succeeded); a "
                       "cancellation also by who asked: owner, other (root, an admin) or ltd "
                       "(its shutdown)")
                 .Register(*registry_)),
      restarts_(BuildCounter()
                    .Name("ltd_job_restarts_total")
                    .Help("Job restarts after a failure (--max-restarts)")
                    .Register(*registry_)
                    .Add({})),
      hangs_(BuildCounter()
                 .Name("ltd_hangs_total")
                 .Help("Heartbeat or startup deadlines missed (a hang verdict)")
                 .Register(*registry_)
                 .Add({})),
      output_lines_(BuildCounter()
                        .Name("ltd_output_lines_total")
                        .Help("Rank output lines ltd received from the jobs' supervisors "
                              "(sent only while a client attaches to or follows the job)")
                        .Register(*registry_)
                        .Add({})),
      teardown_seconds_(
          BuildHistogram()
              .Name("ltd_failure_to_teardown_seconds")
              .Help("From a job's root cause to every process of it gone")
              .Register(*registry_)
              .Add({}, Histogram::BucketBoundaries{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
                                                   5, 10, 30, 60, 300})),
      verdict_seconds_(BuildHistogram()
                           .Name("ltd_deadline_to_verdict_seconds")
                           .Help("From a missed heartbeat deadline to ltd's hang verdict")
                           .Register(*registry_)
                           .Add({}, Histogram::BucketBoundaries{0.001, 0.002, 0.005, 0.01, 0.025,
                                                                0.05, 0.1, 0.25, 0.5, 1, 5})),
      start_wait_seconds_(
          BuildHistogram()
              .Name("ltd_submit_to_running_seconds")
              .Help("From a job's submit to its ranks starting")
              .Register(*registry_)
              .Add({}, Histogram::BucketBoundaries{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300, 1800,
                                                   3600, 4 * 3600, 24 * 3600})) {
  for (JobState s : kStates) jobs_.Add({{"state", std::string(ToString(s))}});
  for (const char* s : {"free", "busy", "quarantined"}) slots_.Add({{"state", s}});
}

Metrics::~Metrics() {
  if (refresh_timer_ != 0) clock_.CancelTimer(refresh_timer_);
  http_.reset();  // its thread stops before the registry goes
}

absl::Status Metrics::Serve(const std::string& listen) {
  if (listen.empty() || listen.find_first_of(" ,\t\n") != std::string::npos) {
    return absl::InvalidArgumentError(
        Cat("--metrics-listen '", listen, "' is not an address; use e.g. 127.0.0.1:9464"));
  }
  // The registry is safe to collect from the server's thread.
  auto http = MetricsHttp::Start(listen, [registry = registry_] {
    return prometheus::TextSerializer().Serialize(registry->Collect());
  });
  if (!http.ok()) return http.status();
  http_ = std::move(*http);
  address_ = http_->address();
  return absl::OkStatus();
}

std::string Metrics::address() const { return address_; }

std::string Metrics::Text() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

void Metrics::PokeRefresh() {
  if (refresh_timer_ != 0) return;
  Millis delay{0};
  if (last_refresh_)
    delay = std::max(Millis(0), *last_refresh_ + kRefreshInterval - clock_.Monotonic());
  refresh_timer_ = clock_.StartTimer(delay, [this] {
    refresh_timer_ = 0;
    Refresh();
  });
}

void Metrics::Refresh() {
  last_refresh_ = clock_.Monotonic();
  std::map<JobState, double> by_state;
  std::map<std::string, double> pending, running_ranks;
  for (const Job* job : sources_.jobs()) {
    by_state[job->state] += 1;
    if (job->state == JobState::kPending) pending[job->user] += 1;
    if (job->state != JobState::kRunning) continue;
    double ranks = 0;
    for (const Rank& r : job->ranks) ranks += r.state == RankState::kRunning ? 1 : 0;
    running_ranks[job->user] += ranks;
  }
  for (JobState s : kStates) jobs_.Add({{"state", std::string(ToString(s))}}).Set(by_state[s]);
  SetPerUser(user_pending_, pending_by_user_, pending);
  SetPerUser(user_running_ranks_, running_ranks_by_user_, running_ranks);
  const Slots slots = sources_.slots();
  slots_.Add({{"state", "free"}}).Set(slots.free);
  slots_.Add({{"state", "busy"}}).Set(slots.busy);
  slots_.Add({{"state", "quarantined"}}).Set(slots.quarantined);
}

void Metrics::SetPerUser(prometheus::Family<prometheus::Gauge>& family,
                         std::map<std::string, prometheus::Gauge*>& gauges,
                         const std::map<std::string, double>& values) {
  for (auto it = gauges.begin(); it != gauges.end();) {
    if (values.count(it->first) == 0 || values.at(it->first) == 0) {
      family.Remove(it->second);  // a user with nothing: no series at all
      it = gauges.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [user, value] : values) {
    if (value == 0) continue;
    auto& g = gauges[user];
    if (g == nullptr) g = &family.Add({{"user", user}});
    g->Set(value);
  }
}

void Metrics::OnStateChanged(const Job& job, JobState from) {
  PokeRefresh();
  if (job.state == JobState::kRunning &&
      (from == JobState::kPending || from == JobState::kStarting)) {
    // The ranks' start: a STARTING node's started_at is its rendezvous's.
    const WallTime started = !job.attempts.empty() ? job.attempts.front().started_at
                                                   : job.started_at.value_or(clock_.Now());
    start_wait_seconds_.Observe(
        Seconds(std::chrono::duration_cast<Millis>(started - job.submitted_at)));
  }
  if (IsFinal(job.state)) {
    const std::string reason = job.state == JobState::kSucceeded || !job.root_cause
                                   ? std::string("none")
                                   : std::string(ToString(job.root_cause->reason));
    std::map<std::string, std::string> labels = {{"state", std::string(ToString(job.state))},
                                                 {"reason", reason}};
    // Who cancelled, in a word: user names would make a series per user.
    if (job.root_cause && !job.root_cause->cancelled_by.empty()) {
      const std::string& by = job.root_cause->cancelled_by;
      labels["cancelled_by"] = by == JobManager::kByLtd ? "ltd"
                               : by == job.user         ? "owner"
                                                        : "other";
    }
    ended_.Add(labels).Increment();
  }
}

namespace {

bool IsHang(const RootCause& c) {
  return c.reason == CauseReason::kHang || c.reason == CauseReason::kStartupTimeout;
}

// Every hang verdict a record shows, by the time it was given: the current
// attempt's and each ended one's (a restarted job keeps them there).
std::map<WallTime, const RootCause*> HangVerdicts(const Job& job) {
  std::map<WallTime, const RootCause*> out;
  if (job.root_cause && IsHang(*job.root_cause)) out[job.root_cause->at] = &*job.root_cause;
  for (const Attempt& a : job.attempts) {
    if (a.root_cause && IsHang(*a.root_cause)) out.emplace(a.root_cause->at, &*a.root_cause);
  }
  return out;
}

size_t EndedAttempts(const Job& job) {
  return static_cast<size_t>(
      std::count_if(job.attempts.begin(), job.attempts.end(),
                    [](const Attempt& a) { return a.ended_at.has_value(); }));
}

}  // namespace

void Metrics::OnRecord(const Job& before, const Job& now) {
  if (now.restart_count > before.restart_count) {
    restarts_.Increment(static_cast<double>(now.restart_count - before.restart_count));
  }
  const auto seen = HangVerdicts(before);
  for (const auto& [at, cause] : HangVerdicts(now)) {
    if (seen.count(at) != 0) continue;
    hangs_.Increment();
    if (cause->deadline_at) {
      verdict_seconds_.Observe(
          Seconds(std::chrono::duration_cast<Millis>(at - *cause->deadline_at)));
    }
  }
  // Attempts whose teardown completed since the last record: from their
  // root cause to every process gone. Attempts only ever end in order.
  for (size_t i = EndedAttempts(before); i < now.attempts.size(); ++i) {
    const Attempt& a = now.attempts[i];
    if (!a.ended_at || !a.root_cause) continue;
    teardown_seconds_.Observe(
        Seconds(std::chrono::duration_cast<Millis>(*a.ended_at - a.root_cause->at)));
  }
}

}  // namespace ltd
