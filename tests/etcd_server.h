// A real etcd for tests: Debian's /usr/bin/etcd on loopback, free ports, a
// temp data dir; stopped (SIGTERM, then SIGKILL) and removed on
// destruction. Tests skip with a clear message where it cannot start.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>

namespace ltd::test {

// etcd over TLS: its certificate and key, and the CA whose clients it
// takes (client certificates required), all PEM files.
struct EtcdTls {
  std::string cert, key, client_ca;
};

class EtcdServer {
 public:
  // Starts it and waits until it answers (10 s at most), on loopback and,
  // given, on `host` too (an address of the machine), which its endpoint
  // then names. With `tls`, its clients speak TLS (url(): etcds://).
  explicit EtcdServer(std::string host = "127.0.0.1", const EtcdTls* tls = nullptr);
  ~EtcdServer();
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }  // why not ok
  std::string endpoint() const { return host_ + ":" + std::to_string(client_port_); }
  std::string url() const { return (tls_ ? "etcds://" : "etcd://") + endpoint(); }
  // Stops it now (etcd "going away"); the destructor then only cleans up.
  void Stop();

 private:
  pid_t pid_ = 0;
  std::string host_;
  int client_port_ = 0;
  bool tls_ = false;
  std::string dir_;
  bool ok_ = false;
  std::string error_;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreeTcpPort();

}  // namespace ltd::test
