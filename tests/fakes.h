// Fakes for the job manager's seams: a clock that moves only when told, a
// launcher with made-up pids that records what it was asked to do.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "clock.h"
#include "job_manager.h"
#include "process.h"

namespace ltd::test {

class FakeClock final : public Clock {
 public:
  WallTime Now() override { return WallTime(std::chrono::seconds(1'800'000'000)) + now_; }
  Millis Monotonic() override { return now_; }
  TimerId StartTimer(Millis delay, std::function<void()> fn) override {
    const TimerId id = next_++;
    timers_[id] = {now_ + std::max(delay, Millis(0)), std::move(fn)};
    return id;
  }
  void CancelTimer(TimerId id) override { timers_.erase(id); }

  // Moves time forward, firing due timers in deadline order.
  void Advance(Millis d) {
    const Millis target = now_ + d;
    for (;;) {
      auto due = timers_.end();
      for (auto it = timers_.begin(); it != timers_.end(); ++it) {
        if (it->second.at <= target && (due == timers_.end() || it->second.at < due->second.at))
          due = it;
      }
      if (due == timers_.end()) break;
      now_ = std::max(now_, due->second.at);
      auto fn = std::move(due->second.fn);
      timers_.erase(due);
      fn();
    }
    now_ = target;
  }
  size_t pending_timers() const { return timers_.size(); }

 private:
  struct Timer {
    Millis at;
    std::function<void()> fn;
  };
  Millis now_{0};
  TimerId next_ = 1;
  std::map<TimerId, Timer> timers_;
};

class FakeLauncher final : public ProcessLauncher {
 public:
  explicit FakeLauncher(FakeClock& clock) : clock_(clock) {}

  struct Proc {
    SpawnRequest request;
    RankCallbacks callbacks;
    pid_t pid = 0;
    bool exited = false;
    std::optional<int> stopped;         // the signal that stopped it
    std::optional<uint64_t> cpu_ticks;  // its main thread's CPU time, if told
  };

  std::string_view containment() const override { return "fake"; }
  absl::Status BeginJob(const std::string& job_id, const JobLimits& limits) override {
    begun.push_back(job_id);
    begun_limits = limits;
    return absl::OkStatus();
  }
  std::optional<uint64_t> OomKills(const std::string&, int rank) override {
    if (!begun_limits.memory()) return std::nullopt;
    auto it = oom_kills.find(rank);
    return it == oom_kills.end() ? 0 : it->second;
  }
  absl::StatusOr<pid_t> Spawn(const SpawnRequest& request, RankCallbacks callbacks) override {
    if (fail_rank == request.rank)
      return absl::UnavailableError("cannot start: Resource temporarily unavailable");
    const pid_t pid = next_pid_++;
    procs.push_back({request, std::move(callbacks), pid, false, std::nullopt, std::nullopt});
    return pid;
  }
  void SignalRank(const std::string& job, int rank, int sig) override {
    Proc& p = Find(job, rank);
    if (!p.exited) signals.emplace_back(p.pid, sig);
  }
  void SignalProcess(const std::string& job, int rank, int sig) override {
    Proc& p = Find(job, rank);
    if (!p.exited) process_signals.emplace_back(p.pid, sig);
  }
  std::optional<int> StopSignal(const std::string& job, int rank) override {
    Proc& p = Find(job, rank);
    if (p.exited) return std::nullopt;
    return p.stopped;
  }
  std::optional<uint64_t> MainThreadCpu(const std::string& job, int rank) override {
    Proc& p = Find(job, rank);
    if (p.exited) return std::nullopt;
    return p.cpu_ticks;
  }
  void KillJob(const std::string& job_id) override { killed_jobs.push_back(job_id); }
  void EndJob(const std::string& job_id, std::function<void()> on_empty) override {
    ended_jobs.push_back(job_id);
    // A process of the job that will not die: the job never empties.
    if (!leftovers.empty()) return;
    clock_.StartTimer(Millis(0), std::move(on_empty));
  }
  std::vector<StuckProcess> Leftovers(const std::string&, size_t max) override {
    std::vector<StuckProcess> out = leftovers;
    if (out.size() > max) out.resize(max);
    return out;
  }
  void Abandon(const std::string& job_id) override { abandoned.push_back(job_id); }

  // The process of `job`'s rank `rank` in its latest attempt.
  Proc& Find(const std::string& job, int rank) {
    for (auto it = procs.rbegin(); it != procs.rend(); ++it) {
      if (it->request.job_id == job && it->request.rank == rank) return *it;
    }
    throw std::runtime_error("no such rank");
  }
  void Exit(const std::string& job, int rank, int code, int sig = 0) {
    Proc& p = Find(job, rank);
    p.exited = true;
    p.callbacks.on_exit(ExitStatus{code, sig});
  }
  void Control(const std::string& job, int rank, std::string_view bytes) {
    Find(job, rank).callbacks.on_control(bytes);
  }
  // Heartbeat bytes that arrived but wait for the next batch read, as the
  // real launcher's may: delivered by ReadHeartbeats.
  void Pending(const std::string& job, int rank, std::string bytes) {
    pending.push_back({job, rank, std::move(bytes)});
  }
  void ReadHeartbeats() override {
    ++heartbeat_reads;
    auto batch = std::move(pending);
    pending.clear();
    for (const auto& [job, rank, bytes] : batch) Control(job, rank, bytes);
  }
  struct PendingBytes {
    std::string job;
    int rank;
    std::string bytes;
  };
  std::vector<PendingBytes> pending;
  int heartbeat_reads = 0;
  void Output(const std::string& job, int rank, Stream s, std::string_view bytes) {
    Find(job, rank).callbacks.on_output(s, bytes);
  }
  // Every rank that got SIGTERM exits of it, as well-behaved ranks do.
  void ExitSignalled(const std::string& job, int sig = 15) {
    for (auto& p : procs) {
      if (p.request.job_id != job || p.exited) continue;
      for (auto [pid, s] : signals) {
        if (pid == p.pid && s == 15) {
          p.exited = true;
          p.callbacks.on_exit(ExitStatus{0, sig});
          break;
        }
      }
    }
  }
  // The pids that got `sig` through SignalRank, in order.
  std::vector<pid_t> Signalled(int sig) const {
    std::vector<pid_t> pids;
    for (auto [pid, s] : signals) {
      if (s == sig) pids.push_back(pid);
    }
    return pids;
  }
  std::string Env(const std::string& job, int rank, const std::string& key) {
    for (const auto& kv : Find(job, rank).request.env) {
      if (kv.starts_with(key + "=")) return kv.substr(key.size() + 1);
    }
    return "<unset>";
  }

  int fail_rank = -1;
  std::vector<Proc> procs;
  std::vector<std::pair<pid_t, int>> signals, process_signals;
  std::vector<std::string> begun, killed_jobs, ended_jobs, abandoned;
  // What is left of a job once its ranks are reaped (Leftovers); while
  // there is any, EndJob never calls back.
  std::vector<StuckProcess> leftovers;
  JobLimits begun_limits;
  std::map<int, uint64_t> oom_kills;  // by rank (the job's when limits are job-wide)

 private:
  FakeClock& clock_;
  pid_t next_pid_ = 1000;
};

// Pretends some pids are Python; hands out canned native stacks when told.
class FakeSampler final : public StackSampler {
 public:
  bool IsPython(pid_t pid) override { return python.contains(pid); }
  void Sample(const std::vector<pid_t>& pids, const Credentials&, Millis budget,
              std::function<void(std::vector<SampledStack>)> done) override {
    requested = pids;
    requested_budget = budget;
    pending = std::move(done);
  }
  // Completes the pending sample: stacks[i] for pids[i], taken (an empty
  // one: the tool gave no frames).
  void Deliver(std::vector<std::string> stacks) {
    std::vector<SampledStack> sampled;
    for (std::string& s : stacks) {
      SampledStack one;
      one.outcome = s.empty() ? SampledStack::Outcome::kFailed : SampledStack::Outcome::kTaken;
      one.note = s.empty() ? "eu-stack gave no frames" : "eu-stack";
      one.text = std::move(s);
      sampled.push_back(std::move(one));
    }
    DeliverSampled(std::move(sampled));
  }
  void DeliverSampled(std::vector<SampledStack> stacks) {
    auto done = std::move(pending);
    pending = nullptr;
    done(std::move(stacks));
  }
  std::set<pid_t> python;
  std::vector<pid_t> requested;
  Millis requested_budget{0};
  std::function<void(std::vector<SampledStack>)> pending;
};

class FakePorts final : public PortAllocator {
 public:
  absl::StatusOr<int> Pick(const std::set<int>& in_use) override {
    int p = 30000;
    while (in_use.contains(p)) ++p;
    picks.push_back(p);
    return p;
  }
  std::vector<int> picks;
};

}  // namespace ltd::test
