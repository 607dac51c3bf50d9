#include "rendezvous.h"

#include <unistd.h>

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
// How often a waiting node seals its records again: well within munged's
// --max-ttl (1 h by default; the TTL its writer asks for).
constexpr std::chrono::seconds kReseal{60};

std::string Seconds(Millis d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

Millis Left(Clock::time_point deadline) {
  return std::max(Millis(1), std::chrono::duration_cast<Millis>(deadline - Clock::now()));
}

bool IsMember(const std::string& prefix, const etcd::KeyValue& kv) {
  return kv.key.rfind(prefix + "nodes/", 0) == 0;
}

}  // namespace

absl::StatusOr<std::string> ParseRdzvUrl(const std::string& url, bool* tls) {
  const std::string scheme = url.rfind("etcds://", 0) == 0 ? "etcds://" : "etcd://";
  if (url.rfind(scheme, 0) != 0 || url.size() == scheme.size()) {
    return absl::InvalidArgumentError(
        "--rdzv '" + DisplayEscapeElided(url, 64, Controls::kEscape) +
        "' is not etcd://HOST:PORT or etcds://HOST:PORT; give etcd's client address");
  }
  if (tls != nullptr) *tls = scheme == "etcds://";
  std::string endpoint = url.substr(scheme.size());
  if (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == endpoint.size() ||
      endpoint.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
    return absl::InvalidArgumentError("--rdzv '" + DisplayEscapeElided(url, 64, Controls::kEscape) +
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
    : config_(std::move(config)), prefix_("/ltd/runs/" + config_.run_id + "/") {
  if (config_.auth == nullptr) config_.auth = std::make_shared<RecordAuth>(nullptr, getuid());
}

absl::Status Rendezvous::Put(const std::string& rest, const std::string& value, int64_t lease) {
  auto sealed = config_.auth->Seal(Key(rest), value);
  if (!sealed.ok()) return sealed.status();
  return client_->Put(Key(rest), *sealed, lease);
}

absl::StatusOr<bool> Rendezvous::Claim(const std::string& rest, const std::string& value,
                                       int64_t lease, etcd::KeyValue* existing) {
  auto sealed = config_.auth->Seal(Key(rest), value);
  if (!sealed.ok()) return sealed.status();
  etcd::KeyValue there;
  auto put = client_->PutIfAbsent(Key(rest), *sealed, lease, &there);
  if (!put.ok() || *put || there.key.empty() || Open(there)) {
    if (existing != nullptr) *existing = std::move(there);
    return put;
  }
  // What is there does not hold: it is no record of this run's owner. A
  // newer value, put since, is looked at again by the caller's next read.
  auto again = client_->PutIfRevision(Key(rest), *sealed, lease, there.mod_revision, existing);
  return again;
}

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
    (void)r->Claim("abort", std::string(s.message()));
  }
  return s;
}

absl::Status Rendezvous::Connect(Clock::time_point deadline) {
  auto client =
      etcd::Client::Connect(config_.endpoint, Left(deadline), config_.abandon, config_.security);
  if (absl::IsCancelled(client.status())) {
    return absl::CancelledError("the rendezvous of run " + config_.run_id + " was given up");
  }
  if (absl::IsPermissionDenied(client.status()) || absl::IsInvalidArgument(client.status())) {
    return client.status();  // etcd refused this node's name or password: said as it is
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
  member_value_ = nlohmann::json{
      {"host", config_.host},
      {"nnodes", config_.nnodes},
      {"devices", config_.devices},
      {"fence",
       kFenceVersion}}.dump();
  sealed_at_ = Clock::now();
  auto claim = [&](int rank, etcd::KeyValue* existing) {
    return Claim("nodes/" + std::to_string(rank), member_value_, lease_, existing);
  };
  if (config_.node_rank >= 0) {
    etcd::KeyValue existing;
    auto ok = claim(config_.node_rank, &existing);
    if (!ok.ok()) return ok.status();
    if (!*ok) {
      const std::optional<std::string> value = Open(existing);
      auto m = value ? ParseMember(prefix_, existing.key, *value, config_.nnodes) : std::nullopt;
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
      if (kv.key != Key("abort") && kv.key != master_key && !IsMember(prefix_, kv)) continue;
      if (!config_.auth->on() && IsMember(prefix_, kv) && kv.value.rfind("MUNGE:", 0) == 0) {
        return absl::FailedPreconditionError(
            "the nodes of run " + config_.run_id +
            " seal their records with MUNGE, this node does not (--rdzv-auth none); give every "
            "node the same --rdzv-auth");
      }
      const std::optional<std::string> value = Open(kv);
      if (!value) continue;  // not the owner's: ignored (counted)
      if (kv.key == Key("abort")) {
        return absl::AbortedError("run " + config_.run_id + " cannot start: " +
                                  DisplayEscapeElided(*value, 512, Controls::kEscape));
      }
      if (kv.key == master_key) {
        master = nlohmann::json::parse(*value, nullptr, false);
        continue;
      }
      // A key of no node of this run (nodes/-1, nodes/7 of 2 nodes) is
      // nobody's: it must not complete the rendezvous.
      auto m = ParseMember(prefix_, kv.key, *value, config_.nnodes);
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
      auto put = Claim("master", value.dump());
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
    Reseal(*all);
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

void Rendezvous::Reseal(const etcd::RangeResult& all) {
  if (!config_.auth->on() || Clock::now() - sealed_at_ < kReseal) return;
  sealed_at_ = Clock::now();
  const std::string mine = Key("nodes/" + std::to_string(agreement_.node_rank));
  for (const etcd::KeyValue& kv : all.kvs) {
    std::optional<std::string> value;
    if (kv.key == mine) {
      value = member_value_;
    } else if (kv.key == Key("master") && agreement_.node_rank == 0) {
      value = Open(kv);  // this node's own, which it wrote
    }
    if (!value) continue;
    auto sealed = config_.auth->Seal(kv.key, *value);
    // Only over the value read: a newer one is someone else's word.
    if (sealed.ok()) (void)client_->PutIfRevision(kv.key, *sealed, kv.lease, kv.mod_revision);
  }
}

absl::Status Rendezvous::Barrier(int attempt, const std::function<bool()>& abandon) {
  const std::string base = "attempts/" + std::to_string(attempt) + "/";
  auto put = Put(base + "ready/" + std::to_string(node_rank()), "1", lease_);
  if (!put.ok()) return put;
  const auto deadline = Clock::now() + config_.timeout;
  const std::string ready = Key(base + "ready/");
  const std::string status = Key("status/");
  for (;;) {
    auto all = client_->GetPrefix(prefix_);
    if (!all.ok()) return all.status();
    int n = 0;
    for (const etcd::KeyValue& kv : all->kvs) {
      const bool is_ready = kv.key.rfind(ready, 0) == 0;
      if (!is_ready && kv.key.rfind(status, 0) != 0) continue;
      const std::optional<std::string> value = Open(kv);
      if (!value) continue;  // not the owner's: ignored (counted)
      if (is_ready) {
        ++n;
        continue;
      }
      auto j = nlohmann::json::parse(*value, nullptr, false);
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
