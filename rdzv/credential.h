// Who wrote a record: a credential over its bytes, made by a service every
// node trusts (MUNGE, as Slurm's nodes use it). The codec is a seam: the
// rendezvous and the fence are tested with a fake one, without munged.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ltd::rdzv {

// What a credential that holds says: who made it, when, and over what.
struct Credential {
  uid_t uid = 0;
  gid_t gid = 0;
  int64_t encoded_at = 0;  // seconds since the epoch, by the encoding host's clock
  std::string payload;
};

class CredentialCodec {
 public:
  virtual ~CredentialCodec() = default;
  // A credential of this process's uid over `payload`, valid for as long
  // as the service allows (MUNGE: munged's --max-ttl).
  virtual absl::StatusOr<std::string> Encode(std::string_view payload) = 0;
  // What `credential` says, or why it does not hold: forged or altered,
  // made with another key, expired (older than its TTL) or from the
  // future (clock skew). A credential decoded before on this host (MUNGE's
  // replay) holds: etcd keeps values, and every reader on a host reads
  // each one (record_auth.h says why that is safe).
  virtual absl::StatusOr<Credential> Decode(std::string_view credential) = 0;
  // For messages: "MUNGE at /run/munge/munge.socket.2".
  virtual std::string Describe() const = 0;
};

// libmunge, speaking to the munged whose socket is `socket`. Each call
// opens its own connection: callable from any thread.
std::unique_ptr<CredentialCodec> MungeCodec(std::string socket);

inline constexpr const char* kDefaultMungeSocket = "/run/munge/munge.socket.2";

}  // namespace ltd::rdzv
