#include "etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace ltd::etcd {
namespace {

namespace pb = etcdserverpb;

absl::Status FromGrpc(const char* call, const std::string& endpoint, const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  const std::string text = std::string(call) + " at etcd " + endpoint + ": " + s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError(text);
    case grpc::StatusCode::UNAVAILABLE:
      return absl::UnavailableError(text);
    case grpc::StatusCode::NOT_FOUND:
      return absl::NotFoundError(text);
    default:
      return absl::UnknownError(text);
  }
}

// Whether etcd refused a call's token: it expired (etcd's --auth-token-ttl)
// or etcd restarted and forgot it.
bool TokenRefused(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
         s.error_message().find("invalid auth token") != std::string::npos;
}

KeyValue FromPb(const mvccpb::KeyValue& kv) {
  KeyValue out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.lease = kv.lease();
  return out;
}

}  // namespace

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

Client::Client(std::string endpoint, std::shared_ptr<grpc::Channel> channel, Security security)
    : endpoint_(std::move(endpoint)),
      channel_(std::move(channel)),
      security_(std::move(security)) {}

Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(std::string endpoint, Millis timeout,
                                                        const std::function<bool()>& abandon,
                                                        Security security) {
  grpc::ChannelArguments args;
  // A lost etcd is noticed by the calls' deadlines; reconnect soon after it
  // is back rather than after gRPC's default backoff of up to 2 minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  // Always a host name or address: the endpoint comes from a user, and a
  // gRPC target such as "unix:..." or "unix-abstract:..." would have a
  // root supervisor speak to a local service's socket on their behalf.
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (security.tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = security.ca_pem;
    ssl.pem_private_key = security.key_pem;
    ssl.pem_cert_chain = security.cert_pem;
    creds = grpc::SslCredentials(ssl);
  }
  auto channel = grpc::CreateCustomChannel("dns:///" + endpoint, creds, args);
  // In slices, so that a give-up is heard within kAbandonPoll however long
  // the timeout (`--rdzv-timeout 8760h` is a user's to choose).
  const auto deadline = std::chrono::system_clock::now() + timeout;
  for (;;) {
    const auto now = std::chrono::system_clock::now();
    if (now >= deadline) {
      return absl::UnavailableError(
          "cannot reach etcd at " + endpoint + " within " + std::to_string(timeout.count()) +
          " ms" + (security.tls ? " over TLS (is its certificate signed by the CA given?)" : ""));
    }
    if (channel->WaitForConnected(std::min(deadline, now + kAbandonPoll))) break;
    if (abandon && abandon()) {
      return absl::CancelledError("gave up connecting to etcd at " + endpoint);
    }
  }
  std::unique_ptr<Client> client(
      new Client(std::move(endpoint), std::move(channel), std::move(security)));
  if (!client->security_.user.empty()) {
    if (auto s = client->Authenticate(); !s.ok()) return s;
  }
  return client;
}

absl::Status Client::Authenticate() {
  pb::AuthenticateRequest req;
  req.set_name(security_.user);
  req.set_password(security_.password);
  pb::AuthenticateResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + call_timeout_);
  auto s = pb::Auth::NewStub(channel_)->Authenticate(&ctx, req, &resp);
  if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
    return absl::OkStatus();  // etcd has no authentication on: no token needed
  }
  if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    return absl::PermissionDeniedError("etcd at " + endpoint_ + " refused the user '" +
                                       security_.user +
                                       "' and its password; check the etcd user file");
  }
  if (!s.ok()) return FromGrpc("Authenticate", endpoint_, s);
  std::lock_guard<std::mutex> lock(token_mu_);
  token_ = resp.token();
  return absl::OkStatus();
}

void Client::Authorize(grpc::ClientContext& ctx) const {
  std::lock_guard<std::mutex> lock(token_mu_);
  if (!token_.empty()) ctx.AddMetadata("token", token_);
}

std::unique_ptr<grpc::ClientContext> Client::Context() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + call_timeout_);
  Authorize(*ctx);
  return ctx;
}

template <typename Fn>
auto Client::Call(Fn&& fn) {
  auto ctx = Context();
  grpc::Status s = fn(*ctx);
  if (!s.ok() && !security_.user.empty() && TokenRefused(s) && Authenticate().ok()) {
    ctx = Context();
    s = fn(*ctx);
  }
  return s;
}

absl::StatusOr<std::optional<KeyValue>> Client::Get(const std::string& key) {
  pb::RangeRequest req;
  req.set_key(key);
  pb::RangeResponse resp;
  auto s = Call(
      [&](grpc::ClientContext& c) { return pb::KV::NewStub(channel_)->Range(&c, req, &resp); });
  if (!s.ok()) return FromGrpc("Range", endpoint_, s);
  if (resp.kvs_size() == 0) return std::optional<KeyValue>();
  return std::optional<KeyValue>(FromPb(resp.kvs(0)));
}

absl::StatusOr<RangeResult> Client::GetPrefix(const std::string& prefix) {
  pb::RangeRequest req;
  req.set_key(prefix);
  req.set_range_end(PrefixEnd(prefix));
  pb::RangeResponse resp;
  auto s = Call(
      [&](grpc::ClientContext& c) { return pb::KV::NewStub(channel_)->Range(&c, req, &resp); });
  if (!s.ok()) return FromGrpc("Range", endpoint_, s);
  RangeResult out;
  out.revision = resp.header().revision();
  for (const auto& kv : resp.kvs()) out.kvs.push_back(FromPb(kv));
  return out;
}

absl::Status Client::Put(const std::string& key, const std::string& value, int64_t lease) {
  pb::PutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_lease(lease);
  pb::PutResponse resp;
  return FromGrpc("Put", endpoint_, Call([&](grpc::ClientContext& c) {
                    return pb::KV::NewStub(channel_)->Put(&c, req, &resp);
                  }));
}

absl::StatusOr<bool> Client::PutIfAbsent(const std::string& key, const std::string& value,
                                         int64_t lease, KeyValue* existing) {
  return PutIfRevision(key, value, lease, 0, existing);
}

absl::StatusOr<bool> Client::PutIfRevision(const std::string& key, const std::string& value,
                                           int64_t lease, int64_t mod_revision,
                                           KeyValue* existing) {
  pb::TxnRequest req;
  pb::Compare* cmp = req.add_compare();
  cmp->set_key(key);
  cmp->set_result(pb::Compare::EQUAL);
  if (mod_revision == 0) {
    cmp->set_target(pb::Compare::CREATE);
    cmp->set_create_revision(0);
  } else {
    cmp->set_target(pb::Compare::MOD);
    cmp->set_mod_revision(mod_revision);
  }
  pb::PutRequest* put = req.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  req.add_failure()->mutable_request_range()->set_key(key);
  pb::TxnResponse resp;
  auto s =
      Call([&](grpc::ClientContext& c) { return pb::KV::NewStub(channel_)->Txn(&c, req, &resp); });
  if (!s.ok()) return FromGrpc("Txn", endpoint_, s);
  if (!resp.succeeded() && existing != nullptr && resp.responses_size() == 1 &&
      resp.responses(0).response_range().kvs_size() == 1) {
    *existing = FromPb(resp.responses(0).response_range().kvs(0));
  }
  return resp.succeeded();
}

absl::Status Client::DeletePrefix(const std::string& prefix) {
  pb::DeleteRangeRequest req;
  req.set_key(prefix);
  req.set_range_end(PrefixEnd(prefix));
  pb::DeleteRangeResponse resp;
  return FromGrpc("DeleteRange", endpoint_, Call([&](grpc::ClientContext& c) {
                    return pb::KV::NewStub(channel_)->DeleteRange(&c, req, &resp);
                  }));
}

absl::StatusOr<int64_t> Client::GrantLease(std::chrono::seconds ttl) {
  pb::LeaseGrantRequest req;
  req.set_ttl(ttl.count());
  pb::LeaseGrantResponse resp;
  auto s = Call([&](grpc::ClientContext& c) {
    return pb::Lease::NewStub(channel_)->LeaseGrant(&c, req, &resp);
  });
  if (!s.ok()) return FromGrpc("LeaseGrant", endpoint_, s);
  if (!resp.error().empty()) {
    return absl::UnknownError("LeaseGrant at etcd " + endpoint_ + ": " + resp.error());
  }
  return resp.id();
}

absl::Status Client::RevokeLease(int64_t lease) {
  pb::LeaseRevokeRequest req;
  req.set_id(lease);
  pb::LeaseRevokeResponse resp;
  return FromGrpc("LeaseRevoke", endpoint_, Call([&](grpc::ClientContext& c) {
                    return pb::Lease::NewStub(channel_)->LeaseRevoke(&c, req, &resp);
                  }));
}

absl::StatusOr<int64_t> Client::KeepAliveOnce(int64_t lease) {
  auto ctx = Context();
  auto stream = pb::Lease::NewStub(channel_)->LeaseKeepAlive(ctx.get());
  pb::LeaseKeepAliveRequest req;
  req.set_id(lease);
  pb::LeaseKeepAliveResponse resp;
  if (!stream->Write(req) || !stream->Read(&resp)) {
    stream->WritesDone();
    grpc::Status s = stream->Finish();
    // An expired token: the next keep-alive, a third of the TTL on, has a new one.
    if (!security_.user.empty() && TokenRefused(s)) (void)Authenticate();
    return FromGrpc("LeaseKeepAlive", endpoint_, s);
  }
  stream->WritesDone();
  ctx->TryCancel();
  (void)stream->Finish();
  return resp.ttl();
}

KeepAlive::KeepAlive(Client& client, int64_t lease, std::chrono::seconds ttl,
                     std::function<void(absl::Status)> on_lost)
    : client_(client), lease_(lease), ttl_(ttl), on_lost_(std::move(on_lost)) {
  thread_ = std::thread([this] { Run(); });
}

KeepAlive::~KeepAlive() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void KeepAlive::Run() {
  // One stream for the lease's life; a broken one is tried again until the
  // lease would have expired, then the lease is lost.
  const auto period = std::chrono::duration_cast<Millis>(ttl_) / 3;
  auto last_ok = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    auto ttl = client_.KeepAliveOnce(lease_);
    lock.lock();
    if (stop_) break;
    const auto now = std::chrono::steady_clock::now();
    if (ttl.ok() && *ttl > 0) {
      last_ok = now;
    } else if (ttl.ok() || now - last_ok >= ttl_) {
      absl::Status why = ttl.ok() ? absl::NotFoundError("the lease expired") : ttl.status();
      lock.unlock();
      if (on_lost_) on_lost_(why);
      return;
    }
    cv_.wait_for(lock, ttl.ok() ? period : period / 4, [this] { return stop_; });
  }
}

Watch::Watch(Client& client, std::string prefix, int64_t start_revision, OnEvents on_events,
             OnError on_error)
    : client_(client),
      prefix_(std::move(prefix)),
      start_revision_(start_revision),
      on_events_(std::move(on_events)),
      on_error_(std::move(on_error)),
      context_(std::make_unique<grpc::ClientContext>()) {
  thread_ = std::thread([this] { Run(); });
}

Watch::~Watch() {
  stopping_ = true;
  context_->TryCancel();
  thread_.join();
}

absl::Status Watch::WaitCreated(Millis timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return created_.has_value(); })) {
    return absl::DeadlineExceededError("etcd at " + client_.endpoint() +
                                       " did not confirm the watch in time");
  }
  return *created_;
}

void Watch::Run() {
  client_.Authorize(*context_);
  auto stream = pb::Watch::NewStub(client_.channel())->Watch(context_.get());
  pb::WatchRequest req;
  pb::WatchCreateRequest* create = req.mutable_create_request();
  create->set_key(prefix_);
  create->set_range_end(PrefixEnd(prefix_));
  create->set_start_revision(start_revision_);
  auto set_created = [this](absl::Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!created_) created_ = std::move(s);
    cv_.notify_all();
  };
  pb::WatchResponse resp;
  if (stream->Write(req)) {
    while (stream->Read(&resp)) {
      if (resp.created()) set_created(absl::OkStatus());
      if (resp.canceled()) break;
      if (resp.events_size() == 0) continue;
      std::vector<WatchEvent> events;
      for (const auto& e : resp.events()) {
        WatchEvent ev;
        ev.deleted = e.type() == mvccpb::Event::DELETE;
        ev.kv = FromPb(e.kv());
        events.push_back(std::move(ev));
      }
      on_events_(std::move(events));
    }
  }
  grpc::Status s = stream->Finish();
  absl::Status why = s.ok() ? absl::UnavailableError("etcd at " + client_.endpoint() +
                                                     " ended the watch: " + resp.cancel_reason())
                            : FromGrpc("Watch", client_.endpoint(), s);
  set_created(why);
  if (!stopping_ && on_error_) on_error_(why);
}

}  // namespace ltd::etcd
