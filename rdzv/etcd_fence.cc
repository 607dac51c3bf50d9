#include "etcd_fence.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "bytes.h"
#include "fence_values.h"
#include "run_hang.h"
#include "run_verdict.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd::rdzv {
namespace {

// A host another node gave, as this node shows it in a table of `nnodes`.
std::string HostOf(const nlohmann::json& j, std::string otherwise, int nnodes) {
  std::string host = JsonText(j, "host", NodeTextMax(nnodes));
  return host.empty() ? otherwise : host;
}

bool IsFinalState(const std::string& s) {
  auto state = ParseJobState(s);
  return state && IsFinal(*state);
}

}  // namespace

EtcdFence::EtcdFence(std::unique_ptr<Rendezvous> rdzv, Post post)
    : rdzv_(std::move(rdzv)), post_(std::move(post)) {}

absl::StatusOr<std::unique_ptr<EtcdFence>> EtcdFence::Start(std::unique_ptr<Rendezvous> rdzv,
                                                            Post post) {
  std::unique_ptr<EtcdFence> f(new EtcdFence(std::move(rdzv), std::move(post)));
  // A lost etcd must not hold this node up for long: every call from now
  // on waits a second at most, and the ranks go on under the local watchdog.
  f->rdzv_->client().set_call_timeout(std::chrono::milliseconds(1000));
  EtcdFence* self = f.get();
  // Records refused from now on, and those the rendezvous refused, go into
  // the job's record; the first of each key into its output too.
  f->rdzv_->auth().OnRefused([self](int64_t total, const std::string& line, bool logged) {
    self->Deliver([total, line](RunFenceEvents& e) { e.OnRefusedRecords(total, line); });
    // RecordAuth logged it: to the job's output only.
    if (logged) self->Deliver([line](RunFenceEvents& e) { e.OnFenceNotice(line); });
  });
  if (const int64_t n = f->rdzv_->auth().refused(); n > 0) {
    f->Deliver([n, line = f->rdzv_->auth().last_refused()](RunFenceEvents& e) {
      e.OnRefusedRecords(n, line);
    });
  }
  auto all = f->rdzv_->client().GetPrefix(f->rdzv_->prefix());
  if (!all.ok()) return all.status();
  f->OnWatchEvents([&] {
    std::vector<etcd::WatchEvent> events;
    for (etcd::KeyValue& kv : all->kvs) events.push_back({false, std::move(kv)});
    return events;
  }());
  f->watch_ = std::make_unique<etcd::Watch>(
      f->rdzv_->client(), f->rdzv_->prefix(), all->revision + 1,
      [self](std::vector<etcd::WatchEvent> events) { self->OnWatchEvents(std::move(events)); },
      [self](absl::Status why) {
        self->Notice(Cat("etcd at ", self->rdzv_->config().endpoint,
                         " is gone: this node no longer hears of the other nodes' failures; its "
                         "ranks go on under the local watchdog (",
                         why.message(), ")"));
      });
  if (auto s = f->watch_->WaitCreated(std::chrono::seconds(5)); !s.ok()) return s;
  f->rdzv_->OnLeaseLost([self](absl::Status why) {
    self->Notice(Cat("this node's etcd lease is lost (", why.message(),
                     "): the other nodes will count it as gone"));
  });
  f->worker_ = std::thread([self] { self->WorkerLoop(); });
  return f;
}

EtcdFence::~EtcdFence() { Close(); }

void EtcdFence::Close() {
  if (closing_.exchange(true)) return;
  sink_->events = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();  // after the queued writes
  watch_.reset();
  rdzv_->Leave();
}

void EtcdFence::SetEvents(RunFenceEvents* events) { sink_->events = events; }

void EtcdFence::Enqueue(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    tasks_.push_back(std::move(task));
  }
  cv_.notify_all();
}

void EtcdFence::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto woken = [this] { return stop_ || !tasks_.empty(); };
    if (due_) {
      cv_.wait_until(lock, *due_, woken);
    } else {
      cv_.wait(lock, woken);
    }
    if (!tasks_.empty()) {
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
      continue;
    }
    if (stop_) return;  // stopped, and every write done
    if (due_ && Clock::now() >= *due_) {
      due_.reset();
      lock.unlock();
      DecideDue();
      lock.lock();
    }
  }
}

void EtcdFence::WakeAt(Clock::time_point when) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (due_ && *due_ <= when) return;
    due_ = when;
  }
  cv_.notify_all();
}

void EtcdFence::Deliver(std::function<void(RunFenceEvents&)> fn) {
  post_([sink = sink_, fn = std::move(fn)] {
    if (sink->events != nullptr) fn(*sink->events);
  });
}

void EtcdFence::Notice(std::string line) {
  spdlog::warn("{}", line);
  Deliver([line = std::move(line)](RunFenceEvents& e) { e.OnFenceNotice(line); });
}

std::chrono::milliseconds EtcdFence::verdict_window() const {
  return VerdictWindow(rdzv_->config().lease_ttl);
}

void EtcdFence::Publish(int attempt, const NodeReport& report) {
  nlohmann::json j{{"kind", ToString(report.kind)},
                   {"what", report.what},
                   {"cause", ToJson(report.cause)},
                   {"host", BytesToJson(rdzv_->config().host)}};
  if (report.hang) j["hang"] = NodeHangToJson(*report.hang, rdzv_->config().devices);
  Enqueue([this, attempt, value = j.dump()] {
    auto put = rdzv_->Put(Cat("attempts/", attempt, "/report/", node_rank()), value);
    if (!put.ok()) {
      Notice(Cat("cannot tell the other nodes of this node's failure: ", put.message()));
    }
  });
}

void EtcdFence::SetState(JobState state, const std::optional<RootCause>& cause) {
  nlohmann::json j{{"state", ToString(state)},
                   {"host", BytesToJson(rdzv_->config().host)},
                   {"root_cause", cause ? ToJson(*cause) : nlohmann::json(nullptr)}};
  Enqueue([this, value = j.dump()] {
    auto put = rdzv_->Put(Cat("status/", node_rank()), value);
    if (!put.ok()) spdlog::warn("this node's state is not in etcd: {}", std::string(put.message()));
  });
}

void EtcdFence::BeginAttempt(int attempt, std::function<void(absl::Status)> ready) {
  attempt_ = attempt;
  Enqueue([this, attempt, ready = std::move(ready)]() mutable {
    absl::Status s = rdzv_->Barrier(attempt, [this] { return closing_.load(); });
    Deliver([s, ready = std::move(ready)](RunFenceEvents&) { ready(s); });
  });
}

void EtcdFence::NodeLost(int node) {
  // Every node that sees it says so; the first word counts (they agree).
  const std::string host = nodes_.count(node) ? nodes_[node].host : "";
  RootCause cause;
  cause.node = node;
  cause.reason = CauseReason::kSupervisorLost;
  cause.exit_code = 1;
  cause.at = std::chrono::system_clock::now();
  cause.message = Cat("node ", node, host.empty() ? "" : Cat(" (", host, ")"),
                      " is gone: its supervisor and ranks vanished (its etcd lease expired)");
  nlohmann::json j{{"kind", ToString(Evidence::kNodeGone)},
                   {"cause", ToJson(cause)},
                   {"host", BytesToJson(host)}};
  const int attempt = attempt_;
  Enqueue([this, attempt, node, value = j.dump()] {
    (void)rdzv_->Claim(Cat("attempts/", attempt, "/gone/", node), value);
  });
}

void EtcdFence::OnReport(int attempt, NodeReport report, bool gone) {
  // Attempts far from this node's are nobody's: a writer cannot make the
  // map grow.
  const int current = attempt_;
  if (attempt < current - 1 || attempt > current + 1) return;
  std::optional<RootCause> failing;
  bool ready = false;
  std::optional<Clock::time_point> wake;
  std::optional<std::pair<NodeReport, std::string>> release;  // a held verdict
  std::vector<NodeReport> reports;
  {
    std::lock_guard<std::mutex> lock(ev_mu_);
    while (!evidence_.empty() && evidence_.begin()->first < current - 1) {
      evidence_.erase(evidence_.begin());
    }
    AttemptEvidence& ev = evidence_[attempt];
    const int node = report.node;
    if (!ev.failing_told && node != node_rank()) {
      ev.failing_told = true;
      failing = report.cause;
    }
    (gone ? ev.gone : ev.reports)[node] = std::move(report);
    if (!ev.window_end) {
      ev.window_end = Clock::now() + verdict_window();
      wake = ev.window_end;
    }
    ready = !ev.decided && VerdictReady(AllOf(ev, false), rdzv_->config().nnodes, false);
    if (ev.held && EvidenceIn(ev, rdzv_->config().nnodes)) {
      release = std::move(ev.held);
      ev.held.reset();
      ev.verdict_told = true;
      reports = AllOf(ev);
    }
  }
  if (failing) {
    Deliver([attempt, cause = std::move(*failing)](RunFenceEvents& ev) {
      ev.OnRunCause(attempt, cause);
    });
  }
  if (release)
    Tell(attempt, std::move(release->first), std::move(release->second), std::move(reports));
  if (wake) WakeAt(*wake);
  if (ready) Enqueue([this, attempt] { Decide(attempt); });
}

bool EtcdFence::EvidenceIn(const AttemptEvidence& ev, int nnodes) {
  int in = 0;
  for (const auto& [n, r] : ev.reports) {
    if (n >= 0 && n < nnodes && (r.kind != Evidence::kPending || ev.gone.count(n) > 0)) ++in;
  }
  for (const auto& [n, r] : ev.gone) {
    auto it = ev.reports.find(n);
    if (n >= 0 && n < nnodes && it == ev.reports.end()) ++in;
  }
  return in >= nnodes;
}

std::vector<NodeReport> EtcdFence::AllOf(const AttemptEvidence& ev, bool with_hang) {
  std::vector<NodeReport> all;
  auto add = [&](const NodeReport& r) {
    if (with_hang) return all.push_back(r);
    NodeReport c;  // the ranking needs no stacks: 16 KiB a node, for every report
    c.node = r.node;
    c.kind = r.kind;
    c.cause = r.cause;
    c.what = r.what;
    c.order = r.order;
    all.push_back(std::move(c));
  };
  for (const auto& [n, r] : ev.reports) add(r);
  for (const auto& [n, r] : ev.gone) add(r);
  return all;
}

void EtcdFence::DecideDue() {
  std::vector<int> due;
  struct Release {
    int attempt;
    std::pair<NodeReport, std::string> verdict;
    std::vector<NodeReport> reports;
  };
  std::vector<Release> released;  // held verdicts whose window passed
  std::optional<Clock::time_point> next;
  {
    std::lock_guard<std::mutex> lock(ev_mu_);
    const auto now = Clock::now();
    for (auto& [attempt, ev] : evidence_) {
      if ((ev.decided && !ev.held) || !ev.window_end) continue;
      if (*ev.window_end > now) {
        if (!next || *ev.window_end < *next) next = ev.window_end;
      } else if (ev.held) {
        released.push_back({attempt, std::move(*ev.held), AllOf(ev)});
        ev.held.reset();
        ev.verdict_told = true;
      } else {
        due.push_back(attempt);
      }
    }
  }
  for (Release& r : released) {
    Tell(r.attempt, std::move(r.verdict.first), std::move(r.verdict.second), std::move(r.reports));
  }
  for (int attempt : due) Decide(attempt);
  if (next) WakeAt(*next);
}

void EtcdFence::Decide(int attempt) {
  NodeReport chosen;
  std::string note;
  {
    std::lock_guard<std::mutex> lock(ev_mu_);
    auto it = evidence_.find(attempt);
    if (it == evidence_.end() || it->second.decided) return;
    AttemptEvidence& ev = it->second;
    std::vector<NodeReport> all = AllOf(ev, false);
    const bool closed = ev.window_end && Clock::now() >= *ev.window_end;
    if (!VerdictReady(all, rdzv_->config().nnodes, closed)) return;
    ev.decided = true;
    chosen = *Strongest(all);
    if (chosen.kind != Evidence::kPrimary && chosen.kind != Evidence::kNodeGone) {
      note =
          closed ? StandingNote(verdict_window()) : "every node reported, none a cause of its own";
    }
  }
  nlohmann::json j{{"node", chosen.node},
                   {"kind", ToString(chosen.kind)},
                   {"what", chosen.what},
                   {"note", note},
                   {"cause", ToJson(chosen.cause)}};
  auto put = rdzv_->Claim(Cat("attempts/", attempt, "/verdict"), j.dump());
  // etcd unreachable: the other nodes cannot hear of it, but this node's
  // record need not wait for what will not come.
  if (!put.ok()) OnVerdict(attempt, std::move(chosen), std::move(note));
}

void EtcdFence::OnVerdict(int attempt, NodeReport verdict, std::string note) {
  // Verdicts of attempts far from this node's are nobody's, as reports.
  const int current = attempt_;
  if (attempt < current - 1 || attempt > current + 1) return;
  std::optional<Clock::time_point> wake;
  std::vector<NodeReport> reports;
  {
    std::lock_guard<std::mutex> lock(ev_mu_);
    AttemptEvidence& ev = evidence_[attempt];
    if (ev.verdict_told || ev.held) return;
    ev.decided = true;
    const auto now = Clock::now();
    if (IsHangCause(verdict.cause) && !EvidenceIn(ev, rdzv_->config().nnodes)) {
      // The run's hang report waits for every node's stacks, at most the window.
      if (!ev.window_end) ev.window_end = now + verdict_window();
      if (*ev.window_end > now) {
        ev.held.emplace(std::move(verdict), std::move(note));
        wake = ev.window_end;
      }
    }
    if (!wake) {
      ev.verdict_told = true;
      reports = AllOf(ev);
    }
  }
  if (wake) return WakeAt(*wake);
  Tell(attempt, std::move(verdict), std::move(note), std::move(reports));
}

void EtcdFence::Tell(int attempt, NodeReport verdict, std::string note,
                     std::vector<NodeReport> reports) {
  Deliver([attempt, verdict = std::move(verdict), note = std::move(note),
           reports = std::move(reports)](RunFenceEvents& ev) {
    ev.OnRunVerdict(attempt, verdict, note, reports);
  });
}

std::vector<NodeStatus> EtcdFence::NodesSnapshot() {
  std::vector<NodeStatus> out;
  for (const auto& [rank, n] : nodes_) out.push_back(n);
  return out;
}

void EtcdFence::OnWatchEvents(std::vector<etcd::WatchEvent> events) {
  // Keys past the run's nodes are nobody's: a writer cannot make this map grow.
  const int nnodes = rdzv_->config().nnodes;
  bool nodes_changed = false;
  for (etcd::WatchEvent& e : events) {
    const std::string& key = e.kv.key;
    if (key.rfind(rdzv_->prefix(), 0) != 0) continue;
    const std::string rest = key.substr(rdzv_->prefix().size());
    if (!e.deleted) {
      // Only the run owner's word counts (record_auth.h); a deletion
      // carries none, and is what an open etcd cannot be kept from.
      std::optional<std::string> value = rdzv_->Open(e.kv);
      if (!value) continue;
      e.kv.value = std::move(*value);
    }
    if (int r = NumberAfter(rest, "nodes/"); r >= 0 && r < nnodes) {
      NodeStatus& n = nodes_[r];
      n.node_rank = r;
      if (e.deleted) {
        members_[r] = false;
        if (!IsFinalState(n.state)) {
          n.state = "LOST";
          if (r != node_rank()) NodeLost(r);
        }
      } else {
        members_[r] = true;
        auto j = nlohmann::json::parse(e.kv.value, nullptr, false);
        n.host = HostOf(j, "", nnodes);
        if (n.state.empty()) n.state = "RUNNING";
      }
      nodes_changed = true;
    } else if (int r = NumberAfter(rest, "status/"); r >= 0 && r < nnodes && !e.deleted) {
      NodeStatus n = nodes_.contains(r) ? nodes_[r] : NodeStatus{};
      if (!ApplyStatus(e.kv.value, n, NodeTextMax(nnodes))) continue;
      n.node_rank = r;
      nodes_[r] = std::move(n);
      nodes_changed = true;
    } else if (!e.deleted) {
      std::optional<AttemptValue> v =
          ParseAttempt(rest, e.kv.value, e.kv.create_revision, nnodes, rdzv_->config().devices);
      if (!v) continue;
      if (v->verdict) {
        OnVerdict(v->attempt, std::move(v->report), std::move(v->note));
      } else {
        OnReport(v->attempt, std::move(v->report), v->gone);
      }
    }
  }
  if (nodes_changed) {
    Deliver([nodes = NodesSnapshot()](RunFenceEvents& ev) { ev.OnNodes(nodes); });
  }
}

}  // namespace ltd::rdzv
