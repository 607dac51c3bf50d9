#include "etcd_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "str_util.h"

extern char** environ;

namespace ltd::test {
namespace {

// Whether etcd serves requests, not only accepts connections: its /health
// says true once it has a leader, which a single member elects a moment
// after it listens. A rendezvous with a 1 s timeout started in between
// would fail for a reason the test is not about.
bool Healthy(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  timeval tv{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[1024];
      ssize_t n;
      while ((n = recv(fd, buf, sizeof buf, 0)) > 0) reply.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return reply.find("\"health\":\"true\"") != std::string::npos;
}

}  // namespace

int FreeTcpPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

EtcdServer::EtcdServer(std::string host, const EtcdTls* tls)
    : host_(std::move(host)), tls_(tls != nullptr) {
  const char* bin = "/usr/bin/etcd";
  if (access(bin, X_OK) != 0) {
    error_ = "etcd is not installed (/usr/bin/etcd; apt-get install etcd-server)";
    return;
  }
  char tmpl[] = "/tmp/ltd-etcd.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    error_ = std::string("mkdtemp: ") + std::strerror(errno);
    return;
  }
  dir_ = tmpl;
  client_port_ = FreeTcpPort();
  const int peer_port = FreeTcpPort();
  // /health on plain HTTP whatever the clients speak.
  const int metrics_port = FreeTcpPort();
  const std::string scheme = tls_ ? "https://" : "http://";
  const std::string loopback = scheme + "127.0.0.1:" + std::to_string(client_port_);
  const std::string client = scheme + host_ + ":" + std::to_string(client_port_);
  const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port);
  std::vector<std::string> args = {
      bin,
      "--name=ltdtest",
      "--data-dir=" + dir_ + "/data",
      "--listen-client-urls=" + loopback + (client != loopback ? "," + client : ""),
      "--advertise-client-urls=" + client,
      "--listen-peer-urls=" + peer,
      "--initial-advertise-peer-urls=" + peer,
      "--initial-cluster=ltdtest=" + peer,
      "--listen-metrics-urls=http://127.0.0.1:" + std::to_string(metrics_port),
      "--log-level=error",
      "--logger=zap"};
  if (tls_) {
    args.push_back("--cert-file=" + tls->cert);
    args.push_back("--key-file=" + tls->key);
    args.push_back("--trusted-ca-file=" + tls->client_ca);
    args.push_back("--client-cert-auth");
  }
  std::vector<char*> argv = CStrings(args);
  const std::string log = dir_ + "/etcd.log";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  const int rc = posix_spawn(&pid_, bin, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    pid_ = 0;
    error_ = std::string("cannot start etcd: ") + std::strerror(rc);
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      error_ = "etcd exited at start; see its log";
      return;
    }
    if (Healthy(metrics_port)) {
      ok_ = true;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  error_ = "etcd was not healthy within 10 s";
}

void EtcdServer::Stop() {
  if (pid_ == 0) return;
  kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = 0;
}

EtcdServer::~EtcdServer() {
  Stop();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

}  // namespace ltd::test
