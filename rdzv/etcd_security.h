// etcd's own TLS and authentication for a node of a run: the files an
// admin (ltd's options) or a user (ltrun's) names, read into what the
// client speaks with. The user file's password and the client key are
// secrets: each must be the reading process's own and readable by no one
// else, or it is refused with one line.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "etcd_client.h"

namespace ltd::rdzv {

struct EtcdFiles {
  std::string ca;         // PEM: the CA that signed etcd's certificate ("": the system's)
  std::string cert;       // PEM: this node's client certificate
  std::string key;        // PEM: its key (private)
  std::string auth_file;  // "USER:PASSWORD" on its first line (private)
};

// `tls`: the endpoint was etcds://. Certificates without TLS are refused
// (they would be ignored).
absl::StatusOr<etcd::Security> LoadSecurity(const EtcdFiles& files, bool tls);

}  // namespace ltd::rdzv
