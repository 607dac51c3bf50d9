// `--rdzv-backend c10d --rdzv-endpoint HOST:PORT` across nodes, as torchrun
// users know it: no etcd to deploy. The node at HOST hosts the run's
// rendezvous on PORT for the run's life and the others meet there. ltd's
// engine stays etcd (its fence, blame and hang report are the same as with
// `--rdzv etcd://`): the hosting ltrun runs a private etcd bound to
// HOST:PORT (peers on loopback), its own child, killed with it
// (PR_SET_PDEATHSIG) and stopped at its end, once the other nodes have
// left the run or after a bounded wait.
//
// Which node hosts: torchrun's rule. The one whose machine has HOST's
// address (localhost, its host name, or an address of its interfaces) and
// can bind PORT there; a second ltrun on the same machine finds the port
// taken and joins as the others do. --rdzv-conf is_host=1|0 decides it
// outright.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ltd {

// The IPv4 address of this machine that `host` names, or "" when it names
// none (or does not resolve).
std::string LocalAddressOf(const std::string& host);

// `host`'s IPv4 address (itself when it is one), or "" when it has none.
std::string ResolveIpv4(const std::string& host);

// Whether ip:port can be bound here now (nothing listens on it).
bool PortFree(const std::string& ip, int port);

// The path of etcd (on PATH, else /usr/bin/etcd), or "" when absent.
std::string FindEtcd();

class PrivateEtcd {
 public:
  // Starts etcd bound to ip:port with its data under `dir` (made here,
  // removed at the end) and waits until it serves, within `timeout`.
  static absl::StatusOr<std::unique_ptr<PrivateEtcd>> Start(const std::string& etcd,
                                                            const std::string& ip, int port,
                                                            const std::string& dir,
                                                            std::chrono::milliseconds timeout);
  ~PrivateEtcd();  // Stop()
  PrivateEtcd(const PrivateEtcd&) = delete;
  PrivateEtcd& operator=(const PrivateEtcd&) = delete;

  // Waits until no node of run `run_id` is left in it, or `timeout`: the
  // others still finishing need the rendezvous until they leave.
  void WaitForOthers(const std::string& run_id, std::chrono::milliseconds timeout);
  // SIGTERM, then SIGKILL after 5 s; reaps it and removes its data.
  void Stop();
  // The address it is bound to: this node's address for the others.
  const std::string& ip() const { return ip_; }

 private:
  PrivateEtcd() = default;
  pid_t pid_ = 0;
  std::string endpoint_;
  std::string ip_;
  std::string dir_;
};

}  // namespace ltd
