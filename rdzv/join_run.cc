#include "join_run.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "etcd_security.h"
#include "str_util.h"

namespace ltd::rdzv {

namespace {

// A port free on this host a moment ago, for the run should this node be
// node 0 (the ranks' TCPStore binds it soon after).
absl::StatusOr<int> FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(Cat("socket: ", std::strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  const int err = errno;
  close(fd);
  if (port == 0) return absl::InternalError(Cat("no free port for the run: ", std::strerror(err)));
  return port;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdFence>> JoinRun(Job& job, EtcdFence::Post post, std::string host,
                                                   std::function<bool()> abandon) {
  NodeSpec& nodes = job.spec.nodes;
  bool tls = false;
  auto endpoint = ParseRdzvUrl(nodes.rdzv, &tls);
  if (!endpoint.ok()) return endpoint.status();
  auto security =
      LoadSecurity({nodes.etcd_ca, nodes.etcd_cert, nodes.etcd_key, nodes.etcd_auth_file}, tls);
  if (!security.ok()) return security.status();
  if (host.empty()) {
    char name[HOST_NAME_MAX + 1] = {};
    if (gethostname(name, sizeof name - 1) == 0) host = name;
  }
  Config c;
  c.endpoint = *endpoint;
  c.security = std::move(*security);
  c.run_id = nodes.run_id.empty() ? job.id : nodes.run_id;
  c.nnodes = nodes.nnodes;
  c.node_rank = nodes.node_rank;
  c.devices = job.spec.devices;
  c.host = host;
  c.master_addr = nodes.master_addr;
  // Node 0's port is the run's: the one given, else the one picked for this job.
  c.master_port = nodes.master_port != 0 ? nodes.master_port : job.master_port;
  if (c.master_port == 0) {
    auto port = FreePort();
    if (!port.ok()) return port.status();
    c.master_port = *port;
  }
  c.timeout = nodes.rdzv_timeout;
  c.lease_ttl = std::chrono::duration_cast<std::chrono::seconds>(nodes.rdzv_lease);
  c.abandon = std::move(abandon);
  // The job's owner's records are the run's: their ltrun's credentials, or
  // those of root's supervisor (lt-shim) made for them.
  const std::string socket = nodes.munge_socket.empty() ? kDefaultMungeSocket : nodes.munge_socket;
  nodes.rdzv_auth = ResolveRdzvAuth(nodes.rdzv_auth, socket);
  c.auth = std::make_shared<RecordAuth>(nodes.rdzv_auth == "munge" ? MungeCodec(socket) : nullptr,
                                        job.spec.uid);
  auto joined = Rendezvous::Join(std::move(c));
  if (!joined.ok()) return joined.status();
  const Agreement agreed = (*joined)->agreement();
  nodes.node_rank = agreed.node_rank;
  nodes.master_addr = agreed.master_addr;
  nodes.master_port = agreed.master_port;
  if (nodes.run_id.empty()) nodes.run_id = (*joined)->config().run_id;
  job.master_port = agreed.master_port;
  return EtcdFence::Start(std::move(*joined), std::move(post));
}

}  // namespace ltd::rdzv
