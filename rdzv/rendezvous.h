// The rendezvous of a multi-node run on etcd: the nodes of run R meet under
// /ltd/runs/R/, each with a lease kept alive while it runs, take their node
// ranks, agree on the master address and port, and start each attempt
// together. Blocking calls with deadlines, for a thread of their own (the
// fence's) or for ltrun before its loop runs.
//
// Keys under the run's prefix:
//   nodes/<r>               a node of the run: {host, nnodes, devices, fence}, on its lease
//   master                  {addr, port}, put by node 0
//   status/<r>              {state, host, root_cause}: what `show` lists per node
//   attempts/<k>/ready/<r>  node r is ready to start attempt k, on its lease
//   attempts/<k>/report/<r> node r's root cause of attempt k and its kind of
//                           evidence (model/run_verdict.h), or a hang's, pending;
//                           a hang's with its ranks' evidence (model/run_hang.h)
//   attempts/<k>/gone/<r>   node r vanished in attempt k (its lease expired), by
//                           whichever node saw it first
//   attempts/<k>/verdict    attempt k's root cause as the run chose it from the
//                           reports: the first node to decide writes it
//   abort                   why the run cannot start (a node set up wrong)
//
// Every value is a credential of its writer (record_auth.h) unless the run
// has --rdzv-auth none: a node believes only its run owner's records.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "etcd_client.h"
#include "record_auth.h"
#include "run_keys.h"

namespace ltd::rdzv {

using Millis = std::chrono::milliseconds;

// How the nodes of a run agree on what failed (the keys under attempts/):
// nodes that do it differently would each record a different root cause,
// so a run's nodes must all speak the same version; a node key without it
// is version 1's (one create-only `cause` per attempt, the first to come).
inline constexpr int kFenceVersion = 2;

struct Config {
  std::string endpoint;     // HOST:PORT of etcd
  etcd::Security security;  // TLS and etcd's own authentication
  std::string run_id;
  int nnodes = 1;
  int node_rank = -1;       // -1: the first free rank, in join order
  int devices = 1;          // ranks per node; every node must agree
  std::string host;         // this node's address, for the others and for `show`
  std::string master_addr;  // given (--master-addr), else the address node 0 reaches etcd from
  int master_port = 0;      // node 0's: given or picked by it
  Millis timeout{10 * 60 * 1000};
  std::chrono::seconds lease_ttl{5};
  // Polled while waiting for the others: true gives up (a job cancelled
  // during its rendezvous).
  std::function<bool()> abandon;
  // Seals what this node writes and checks what it reads; null: none.
  std::shared_ptr<RecordAuth> auth;
};

struct Agreement {
  int node_rank = 0;
  std::string master_addr;
  int master_port = 0;
  int64_t revision = 0;  // etcd's revision when every node had joined
};

// "etcd://HOST:PORT" -> "HOST:PORT", or a one-line error. `tls`, given,
// says whether it was "etcds://" (etcd over TLS).
absl::StatusOr<std::string> ParseRdzvUrl(const std::string& url, bool* tls = nullptr);
// A run id must be a key segment: letters, digits, '.', '_', '-'.
absl::Status CheckRunId(const std::string& run_id);

class Rendezvous {
 public:
  // Connects, joins and waits until every node of the run has: all within
  // `config.timeout`. Errors are one line for the user.
  static absl::StatusOr<std::unique_ptr<Rendezvous>> Join(Config config);
  ~Rendezvous();  // leaves: revokes the lease (best effort)

  const Config& config() const { return config_; }
  const Agreement& agreement() const { return agreement_; }
  int node_rank() const { return agreement_.node_rank; }
  etcd::Client& client() { return *client_; }
  int64_t lease() const { return lease_; }
  std::string Key(const std::string& rest) const { return prefix_ + rest; }
  const std::string& prefix() const { return prefix_; }
  RecordAuth& auth() { return *config_.auth; }

  // `value` sealed and put at Key(rest) (on `lease`, 0: none).
  absl::Status Put(const std::string& rest, const std::string& value, int64_t lease = 0);
  // `value` sealed and put at Key(rest) unless a value that holds is
  // there: one that does not (another user's, a forgery) is replaced, so
  // that it cannot take this run's key. Returns whether it was put; when
  // not, `existing` holds what is there.
  absl::StatusOr<bool> Claim(const std::string& rest, const std::string& value, int64_t lease = 0,
                             etcd::KeyValue* existing = nullptr);
  // What `kv` says if it holds (record_auth.h).
  std::optional<std::string> Open(const etcd::KeyValue& kv) { return config_.auth->Open(kv); }

  // Says this node is ready for attempt k and waits until every node is,
  // up to config.timeout, or until `abandon` returns true (polled). Fails
  // when a node ended for good (status final) or the wait ran out.
  absl::Status Barrier(int attempt, const std::function<bool()>& abandon);

  // Once etcd stops keeping this node's lease (etcd gone): `on_lost` runs
  // once on the keep-alive thread.
  void OnLeaseLost(std::function<void(absl::Status)> on_lost);

  // Leaves the run now (the destructor does the same).
  void Leave();

 private:
  explicit Rendezvous(Config config);
  absl::Status Connect(std::chrono::steady_clock::time_point deadline);
  absl::Status ClaimRank();
  absl::Status AwaitNodes(std::chrono::steady_clock::time_point deadline);
  // During a long wait: this node's key and node 0's master again, in new
  // credentials, before the old ones expire for a node that joins late.
  void Reseal(const etcd::RangeResult& all);

  Config config_;
  std::string prefix_;
  std::unique_ptr<etcd::Client> client_;
  int64_t lease_ = 0;
  std::unique_ptr<etcd::KeepAlive> keepalive_;
  std::function<void(absl::Status)> on_lease_lost_;
  std::mutex mu_;  // on_lease_lost_ against the keep-alive thread
  Agreement agreement_;
  std::string member_value_;  // this node's nodes/<r>, unsealed
  std::chrono::steady_clock::time_point sealed_at_{};
};

}  // namespace ltd::rdzv
