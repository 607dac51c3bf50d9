// The records a run's nodes write to etcd, as credentials of their
// writers. Anyone who reaches etcd can write under a run's prefix; with
// MUNGE on, a node believes a record only when MUNGE says it was made for
// this key by the run's owner:
//
//   - the credential decodes (a MUNGE key every node shares; not altered;
//     not expired: its writer asks munged's longest TTL, --max-ttl, 1 h by
//     default; not from the future);
//   - its payload names the etcd key it was read from, so a record cannot
//     be moved to another key, node or run;
//   - it carries the owner's uid (the user who started this node): made
//     by that uid (their ltrun), or by root (ltd's supervisors, lt-shim)
//     with that uid inside the payload.
//
// MUNGE's replay cache would refuse a credential decoded twice on a host;
// etcd keeps values and every node on a host reads each one, so a replayed
// credential holds. That is safe because of the key binding: a replay can
// only put back, at the same key, what the owner once wrote there. Each
// reader decodes a value once (by key and revision) and keeps the answer.
//
// A record that does not hold is ignored, counted, and logged once per key.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "credential.h"
#include "etcd_client.h"

namespace ltd::rdzv {

// --rdzv-auth: "munge", "none", or "auto" (munge where munged's socket is).
absl::Status CheckRdzvAuth(const std::string& mode);
// "" or "auto" -> "munge" when `socket` is a socket, else "none".
std::string ResolveRdzvAuth(const std::string& mode, const std::string& socket);

class RecordAuth {
 public:
  // `codec` null: records are plain and believed as they are (--rdzv-auth
  // none). `owner`: the uid whose records this node believes.
  RecordAuth(std::unique_ptr<CredentialCodec> codec, uid_t owner);
  RecordAuth(const RecordAuth&) = delete;
  RecordAuth& operator=(const RecordAuth&) = delete;

  bool on() const { return codec_ != nullptr; }
  uid_t owner() const { return owner_; }

  // The value to put at `key`: `value` sealed in a credential of this
  // process (as `owner`, inside the payload).
  absl::StatusOr<std::string> Seal(const std::string& key, const std::string& value) const;
  // What `kv` says, when it holds; else nullopt, and the refusal is
  // counted (once per key and revision) and logged (once per key).
  std::optional<std::string> Open(const etcd::KeyValue& kv);

  // Refused records so far, and the last refusal in one line.
  int64_t refused() const;
  std::string last_refused() const;
  // Runs (on the reading thread, no lock held) after each refusal;
  // `logged`: the first of its key (at most 64 keys), worth telling the user.
  void OnRefused(std::function<void(int64_t total, const std::string& line, bool logged)> fn);

  // Payload framing, for tests: "ltd-rdzv 1\n<uid>\n<key>\n<value>".
  static std::string Frame(uid_t uid, const std::string& key, const std::string& value);

 private:
  // The value, or why the record does not hold.
  absl::StatusOr<std::string> Check(const etcd::KeyValue& kv) const;

  const std::unique_ptr<CredentialCodec> codec_;
  const uid_t owner_;
  mutable std::mutex mu_;
  // (key, mod_revision) -> its value, or nullopt: refused. Bounded.
  std::map<std::pair<std::string, int64_t>, std::optional<std::string>> seen_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> logged_ ABSL_GUARDED_BY(mu_);  // keys whose refusal was logged
  int64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_ ABSL_GUARDED_BY(mu_);
  bool unavailable_logged_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void(int64_t, const std::string&, bool)> on_refused_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ltd::rdzv
