// A small etcd v3 client over gRPC: the KV, Lease and Watch calls the
// rendezvous and the fence need, each with a deadline. Blocking calls, for
// the rendezvous' own threads; never call them on the loop thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace ltd::etcd {

using Millis = std::chrono::milliseconds;

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

struct WatchEvent {
  bool deleted = false;  // else a put
  KeyValue kv;
};

// How to reach etcd beyond a plain connection: TLS (etcds://) with the CA
// that signed etcd's certificate and this node's client certificate, and
// etcd's own authentication (a user and password: every call then carries
// the token etcd gave for them).
struct Security {
  bool tls = false;
  std::string ca_pem;    // empty: the system's roots
  std::string cert_pem;  // with key_pem: a client certificate
  std::string key_pem;
  std::string user;  // empty: no authentication
  std::string password;
};

// Keys with `prefix`, and the store's revision they were read at.
struct RangeResult {
  std::vector<KeyValue> kvs;
  int64_t revision = 0;
};

class Client {
 public:
  // `endpoint` is HOST:PORT. Waits up to `timeout` for a connection, or
  // until `abandon` returns true (polled every kAbandonPoll): a job killed
  // while its supervisor waits for etcd must not keep the supervisor.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      std::string endpoint, Millis timeout, const std::function<bool()>& abandon = nullptr,
      Security security = {});
  static constexpr Millis kAbandonPoll{200};
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  // Every unary call waits at most this long.
  void set_call_timeout(Millis t) { call_timeout_ = t; }

  absl::StatusOr<std::optional<KeyValue>> Get(const std::string& key);
  absl::StatusOr<RangeResult> GetPrefix(const std::string& prefix);
  absl::Status Put(const std::string& key, const std::string& value, int64_t lease = 0);
  // Puts only where the key does not exist (a Txn on create_revision 0).
  // Returns whether it was put; when not, `existing` holds what is there.
  absl::StatusOr<bool> PutIfAbsent(const std::string& key, const std::string& value,
                                   int64_t lease = 0, KeyValue* existing = nullptr);
  // Puts only where the key is still at `mod_revision` (a value read
  // before and found wanting is replaced, not a newer one).
  absl::StatusOr<bool> PutIfRevision(const std::string& key, const std::string& value,
                                     int64_t lease, int64_t mod_revision,
                                     KeyValue* existing = nullptr);
  absl::Status DeletePrefix(const std::string& prefix);

  // A lease of `ttl`; its keys go when it is neither kept alive nor revoked.
  absl::StatusOr<int64_t> GrantLease(std::chrono::seconds ttl);
  absl::Status RevokeLease(int64_t lease);
  // One keep-alive on the LeaseKeepAlive stream; returns the TTL left (0:
  // the lease is gone).
  absl::StatusOr<int64_t> KeepAliveOnce(int64_t lease);

  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  // Adds etcd's token to a call of a stream (Watch) made outside the client.
  void Authorize(grpc::ClientContext& ctx) const;

 private:
  Client(std::string endpoint, std::shared_ptr<grpc::Channel> channel, Security security);
  std::unique_ptr<grpc::ClientContext> Context() const;
  // A token for the user and password (etcd's Authenticate).
  absl::Status Authenticate();
  // Runs a unary call; once more with a new token when etcd says the token
  // has expired (etcd forgets them after --auth-token-ttl, or a restart).
  template <typename Fn>
  auto Call(Fn&& fn);

  std::string endpoint_;
  std::shared_ptr<grpc::Channel> channel_;
  const Security security_;
  mutable std::mutex token_mu_;
  std::string token_;  // guarded by token_mu_
  Millis call_timeout_{3000};
};

// Keeps a lease alive from a thread of its own, a third of its TTL apart,
// on one LeaseKeepAlive stream. `on_lost` runs once (on that thread) when
// etcd stops answering or the lease is gone.
class KeepAlive {
 public:
  KeepAlive(Client& client, int64_t lease, std::chrono::seconds ttl,
            std::function<void(absl::Status)> on_lost);
  ~KeepAlive();  // stops the thread
  KeepAlive(const KeepAlive&) = delete;
  KeepAlive& operator=(const KeepAlive&) = delete;

 private:
  void Run();

  Client& client_;
  const int64_t lease_;
  const std::chrono::seconds ttl_;
  std::function<void(absl::Status)> on_lost_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// A watch on every key under a prefix, from `start_revision` (0: now), on
// a Watch stream read by a thread of its own. `on_events` runs on that
// thread for each batch, in revision order; `on_error` once if the stream
// breaks (etcd gone), not when the watch is destroyed.
class Watch {
 public:
  using OnEvents = std::function<void(std::vector<WatchEvent>)>;
  using OnError = std::function<void(absl::Status)>;
  Watch(Client& client, std::string prefix, int64_t start_revision, OnEvents on_events,
        OnError on_error);
  ~Watch();  // cancels the stream and joins the thread
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  // Blocks until etcd confirmed the watch (so no later write is missed),
  // or `timeout`.
  absl::Status WaitCreated(Millis timeout);

 private:
  void Run();

  Client& client_;
  const std::string prefix_;
  const int64_t start_revision_;
  OnEvents on_events_;
  OnError on_error_;
  std::unique_ptr<grpc::ClientContext> context_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<absl::Status> created_;  // guarded by mu_
  std::thread thread_;
};

// The end of the range of every key under `prefix` (etcd's prefix rule:
// the prefix with its last byte raised).
std::string PrefixEnd(std::string_view prefix);

}  // namespace ltd::etcd
