// The address this host reaches another one from: what node 0 of a run
// advertises as the master address. A host name may resolve to a loopback
// address on the host itself (Debian's /etc/hosts maps it to 127.0.1.1),
// which no other node can reach; the source address of the route to etcd
// is one every node that reaches etcd the same way can reach.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace ltd::rdzv {

// The local address the kernel would send from to `endpoint` (HOST:PORT,
// [V6]:PORT). Connects a UDP socket, which sends nothing. Resolves HOST
// when it is a name.
absl::StatusOr<std::string> AddressTowards(const std::string& endpoint);

}  // namespace ltd::rdzv
