#include "rendezvous.h"

#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "bytes.h"
#include "route_address.h"

namespace ltd::rdzv {
namespace {

using Clock = std::chrono::steady_clock;
// How often a waiting node reads the run's keys: etcd on a LAN answers in
// well under a millisecond, and a start is a once-per-attempt wait.
constexpr Millis kPoll{10};

std::string Seconds(Millis d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

Millis Left(Clock::time_point deadline) {
  return std::max(Millis(1), std::chrono::duration_cast<Millis>(deadline - Clock::now()));
}

}  // namespace

absl::StatusOr<std::string> ParseRdzvUrl(const std::string& url) {
  const std::string scheme = "etcd://";
  if (url.rfind(scheme, 0) != 0 || url.size() == scheme.size()) {
    return absl::InvalidArgumentError("--rdzv '" + url +
                                      "' is not etcd://HOST:PORT; give etcd's client address");
  }
  std::string endpoint = url.substr(scheme.size());
  if (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == endpoint.size() ||
      endpoint.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
    return absl::InvalidArgumentError("--rdzv '" + url +
                                      "' has no port; give etcd://HOST:PORT (etcd's is 2379)");
  }
  return endpoint;
}

absl::Status CheckRunId(const std::string& run_id) {
  if (run_id.empty() || run_id.size() > 128 ||
      run_id.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
          std::string::npos) {
    return absl::InvalidArgumentError(
        "--run-id must be 1-128 letters, digits, '.', '_' or '-' (it names the run in etcd)");
  }
  return absl::OkStatus();
}

Rendezvous::Rendezvous(Config config)
    : config_(std::move(config)), prefix_("/ltd/runs/" + config_.run_id + "/") {}

Rendezvous::~Rendezvous() { Leave(); }

void Rendezvous::Leave() {
  keepalive_.reset();
  if (client_ != nullptr && lease_ != 0) {
    client_->set_call_timeout(Millis(1000));
    (void)client_->RevokeLease(lease_);
  }
  lease_ = 0;
}

void Rendezvous::OnLeaseLost(std::function<void(absl::Status)> on_lost) {
  std::lock_guard<std::mutex> lock(mu_);
  on_lease_lost_ = std::move(on_lost);
}

absl::StatusOr<std::unique_ptr<Rendezvous>> Rendezvous::Join(Config config) {
  if (auto s = CheckRunId(config.run_id); !s.ok()) return s;
  const auto deadline = Clock::now() + config.timeout;
  std::unique_ptr<Rendezvous> r(new Rendezvous(std::move(config)));
  if (auto s = r->Connect(deadline); !s.ok()) return s;
  absl::Status s = r->ClaimRank();
  if (s.ok()) s = r->AwaitNodes(deadline);
  if (s.ok()) return r;
  // A node that is set up wrong ends the run's start for every node, at
  // once and with its message, rather than leaving them to their timeout.
  if (absl::IsAlreadyExists(s) || absl::IsFailedPrecondition(s) || absl::IsResourceExhausted(s)) {
    (void)r->client_->PutIfAbsent(r->Key("abort"), std::string(s.message()));
  }
  return s;
}

absl::Status Rendezvous::Connect(Clock::time_point deadline) {
  auto client = etcd::Client::Connect(config_.endpoint, Left(deadline), config_.abandon);
  if (absl::IsCancelled(client.status())) {
    return absl::CancelledError("the rendezvous of run " + config_.run_id + " was given up");
  }
  if (!client.ok()) {
    return absl::UnavailableError("cannot reach etcd at " + config_.endpoint +
                                  " within --rdzv-timeout " + Seconds(config_.timeout) +
                                  "; is etcd running there?");
  }
  client_ = std::move(*client);
  auto lease = client_->GrantLease(config_.lease_ttl);
  if (!lease.ok()) return lease.status();
  lease_ = *lease;
  keepalive_ = std::make_unique<etcd::KeepAlive>(*client_, lease_, config_.lease_ttl,
                                                 [this](absl::Status why) {
                                                   std::lock_guard<std::mutex> lock(mu_);
                                                   if (on_lease_lost_)
                                                     on_lease_lost_(std::move(why));
                                                 });
  return absl::OkStatus();
}

absl::Status Rendezvous::ClaimRank() {
  const std::string me = nlohmann::json{
      {"host", config_.host},
      {"nnodes", config_.nnodes},
      {"devices", config_.devices},
      {"fence",
       kFenceVersion}}.dump();
  auto claim = [&](int rank, etcd::KeyValue* existing) {
    return client_->PutIfAbsent(Key("nodes/" + std::to_string(rank)), me, lease_, existing);
  };
  if (config_.node_rank >= 0) {
    etcd::KeyValue existing;
    auto ok = claim(config_.node_rank, &existing);
    if (!ok.ok()) return ok.status();
    if (!*ok) {
      auto m = ParseMember(prefix_, existing.key, existing.value, config_.nnodes);
      return absl::AlreadyExistsError(
          "node rank " + std::to_string(config_.node_rank) + " of run " + config_.run_id +
          " is already taken" + (m && !m->host.empty() ? " by host " + m->host : "") +
          "; give each node its own --node-rank (or none: they take ranks in join order)");
    }
    agreement_.node_rank = config_.node_rank;
    return absl::OkStatus();
  }
  for (int rank = 0; rank < config_.nnodes; ++rank) {
    auto ok = claim(rank, nullptr);
    if (!ok.ok()) return ok.status();
    if (*ok) {
      agreement_.node_rank = rank;
      return absl::OkStatus();
    }
  }
  return absl::ResourceExhaustedError("run " + config_.run_id + " already has its " +
                                      std::to_string(config_.nnodes) +
                                      " nodes (--nnodes); start a new run with another --run-id");
}

absl::Status Rendezvous::AwaitNodes(Clock::time_point deadline) {
  const std::string master_key = Key("master");
  std::set<int> joined;
  for (;;) {
    auto all = client_->GetPrefix(prefix_);
    if (!all.ok()) return all.status();
    joined.clear();
    std::optional<nlohmann::json> master;
    for (const etcd::KeyValue& kv : all->kvs) {
      if (kv.key == Key("abort")) {
        return absl::AbortedError("run " + config_.run_id + " cannot start: " +
                                  DisplayEscapeElided(kv.value, 512, Controls::kEscape));
      }
      if (kv.key == master_key) {
        master = nlohmann::json::parse(kv.value, nullptr, false);
        continue;
      }
      // A key of no node of this run (nodes/-1, nodes/7 of 2 nodes) is
      // nobody's: it must not complete the rendezvous.
      auto m = ParseMember(prefix_, kv.key, kv.value, config_.nnodes);
      if (!m) continue;
      joined.insert(m->rank);
      if (m->nnodes != config_.nnodes) {
        return absl::FailedPreconditionError(
            "node " + std::to_string(m->rank) + " (" + m->host + ") of run " + config_.run_id +
            " says --nnodes " + std::to_string(m->nnodes) + ", this node " +
            std::to_string(config_.nnodes) + "; every node must give the same --nnodes");
      }
      if (m->devices != config_.devices) {
        return absl::FailedPreconditionError(
            "node " + std::to_string(m->rank) + " (" + m->host + ") of run " + config_.run_id +
            " runs " + std::to_string(m->devices) + " ranks per node, this node " +
            std::to_string(config_.devices) + "; every node must give the same --devices");
      }
      if (m->fence != kFenceVersion) {
        return absl::FailedPreconditionError(
            "node " + std::to_string(m->rank) + " (" + m->host + ") of run " + config_.run_id +
            " runs an ltd release whose nodes agree on a failure's cause another way (version " +
            std::to_string(m->fence) + ", this node " + std::to_string(kFenceVersion) +
            "); run the same ltd release on every node");
      }
    }
    if (agreement_.node_rank == 0 && !master) {
      // Given, or the address this node reaches etcd from: the others
      // reach etcd too, so they can most likely reach that. Its host
      // name is the last resort (it may be a loopback address here).
      std::string addr = config_.master_addr;
      if (addr.empty()) addr = AddressTowards(config_.endpoint).value_or(config_.host);
      nlohmann::json value{{"addr", addr}, {"port", config_.master_port}};
      auto put = client_->PutIfAbsent(master_key, value.dump());
      if (!put.ok()) return put.status();
      continue;  // read it back with the others
    }
    if (master && master->is_object() && static_cast<int>(joined.size()) >= config_.nnodes) {
      // Node 0's word becomes every rank's MASTER_ADDR and MASTER_PORT.
      const std::optional<Master> m = ParseMaster(*master);
      if (!m) {
        return absl::FailedPreconditionError(
            "run " + config_.run_id + "'s master in etcd (" +
            DisplayEscapeElided(master->dump(), 128, Controls::kEscape) +
            ") is not a host and port; start the run again "
            "with a new --run-id");
      }
      agreement_.master_addr = m->addr;
      agreement_.master_port = m->port;
      agreement_.revision = all->revision;
      return absl::OkStatus();
    }
    if (config_.abandon && config_.abandon()) {
      return absl::CancelledError("the rendezvous of run " + config_.run_id + " was given up");
    }
    if (Clock::now() >= deadline) {
      std::string which;
      for (int r : joined) which += (which.empty() ? "" : ",") + std::to_string(r);
      return absl::DeadlineExceededError(
          "the rendezvous of run " + config_.run_id + " did not complete within --rdzv-timeout " +
          Seconds(config_.timeout) + ": " + std::to_string(joined.size()) + " of " +
          std::to_string(config_.nnodes) + " nodes joined (node(s) " + which +
          "); start the others with the same --rdzv and --run-id");
    }
    std::this_thread::sleep_for(kPoll);
  }
}

absl::Status Rendezvous::Barrier(int attempt, const std::function<bool()>& abandon) {
  const std::string base = "attempts/" + std::to_string(attempt) + "/";
  auto put = client_->Put(Key(base + "ready/" + std::to_string(node_rank())), "1", lease_);
  if (!put.ok()) return put;
  const auto deadline = Clock::now() + config_.timeout;
  const std::string ready = Key(base + "ready/");
  const std::string status = Key("status/");
  for (;;) {
    auto all = client_->GetPrefix(prefix_);
    if (!all.ok()) return all.status();
    int n = 0;
    for (const etcd::KeyValue& kv : all->kvs) {
      if (kv.key.rfind(ready, 0) == 0) ++n;
      if (kv.key.rfind(status, 0) != 0) continue;
      auto j = nlohmann::json::parse(kv.value, nullptr, false);
      const std::string state = JsonText(j, "state", 32);
      if (state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED" || state == "LOST") {
        return absl::AbortedError("node " + kv.key.substr(status.size()) + " of run " +
                                  config_.run_id + " ended (" + state +
                                  ") and will not start attempt " + std::to_string(attempt));
      }
    }
    if (n >= config_.nnodes) return absl::OkStatus();
    if (abandon && abandon()) return absl::CancelledError("cancelled");
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError(
          "the nodes of run " + config_.run_id + " did not all come back for restart " +
          std::to_string(attempt) + " within --rdzv-timeout " + Seconds(config_.timeout) + " (" +
          std::to_string(n) + " of " + std::to_string(config_.nnodes) + ")");
    }
    std::this_thread::sleep_for(kPoll);
  }
}

}  // namespace ltd::rdzv
