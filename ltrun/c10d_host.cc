#include "c10d_host.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "bytes.h"
#include "etcd_client.h"
#include "file_io.h"
#include "str_util.h"

namespace ltd {
namespace {

std::set<std::string> OwnAddresses() {
  std::set<std::string> out = {"127.0.0.1"};
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) out.insert(text);
  }
  freeifaddrs(list);
  return out;
}

// The last "msg" of etcd's log (zap's JSON lines): why it would not start.
std::string LastMessage(const std::string& log) {
  auto text = ReadWholeFile(log, 1 << 20);
  if (!text.ok()) return "";
  const std::string key = "\"msg\":\"";
  const size_t at = text->rfind(key);
  if (at == std::string::npos) return "";
  const size_t end = text->find('"', at + key.size());
  return DisplayEscapeElided(text->substr(at + key.size(), end - at - key.size()), 200,
                             Controls::kEscape);
}

}  // namespace

std::string LocalAddressOf(const std::string& host) {
  if (host == "localhost" || host == "127.0.0.1") return "127.0.0.1";
  const std::set<std::string> own = OwnAddresses();
  if (own.contains(host)) return host;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return "";
  std::string out;
  for (addrinfo* a = found; a != nullptr && out.empty(); a = a->ai_next) {
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) == nullptr) continue;
    // A name of this machine that resolves to loopback (Debian's
    // 127.0.1.1 for its host name) is this machine's all the same.
    if (own.contains(text) || std::string_view(text).starts_with("127.")) out = text;
  }
  freeaddrinfo(found);
  return out;
}

std::string ResolveIpv4(const std::string& host) {
  if (host == "localhost") return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return "";
  char text[INET_ADDRSTRLEN] = {};
  const auto* in = reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  std::string out = inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr ? text : "";
  freeaddrinfo(found);
  return out;
}

bool PortFree(const std::string& ip, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = inet_pton(AF_INET, ip.c_str(), &a.sin_addr) == 1 &&
                  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

std::string FindEtcd() {
  const char* path = std::getenv("PATH");
  for (std::string_view dir : Split(path != nullptr ? path : "", ':')) {
    if (dir.empty()) continue;
    const std::string bin = Cat(dir, "/etcd");
    if (access(bin.c_str(), X_OK) == 0) return bin;
  }
  return access("/usr/bin/etcd", X_OK) == 0 ? "/usr/bin/etcd" : "";
}

absl::StatusOr<std::unique_ptr<PrivateEtcd>> PrivateEtcd::Start(const std::string& etcd,
                                                                const std::string& ip, int port,
                                                                const std::string& dir,
                                                                std::chrono::milliseconds timeout) {
  std::unique_ptr<PrivateEtcd> self(new PrivateEtcd);
  self->endpoint_ = Cat(ip, ":", port);
  self->ip_ = ip;
  self->dir_ = dir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(Cat("cannot make ", dir, ": ", ec.message()));
  // Its peer port is on loopback: a member of one talks to nobody.
  int peer = 0;
  for (int tries = 0; tries < 20 && peer == 0; ++tries) {
    const int candidate = 20000 + static_cast<int>((getpid() * 7919 + tries * 104729) % 40000);
    if (candidate != port && PortFree("127.0.0.1", candidate)) peer = candidate;
  }
  if (peer == 0) return absl::InternalError("no free port on 127.0.0.1 for etcd's peer address");
  const std::string client = Cat("http://", self->endpoint_);
  const std::string peer_url = Cat("http://127.0.0.1:", peer);
  const std::vector<std::string> args = {etcd,
                                         "--name=ltrun",
                                         Cat("--data-dir=", dir, "/data"),
                                         Cat("--listen-client-urls=", client),
                                         Cat("--advertise-client-urls=", client),
                                         Cat("--listen-peer-urls=", peer_url),
                                         Cat("--initial-advertise-peer-urls=", peer_url),
                                         Cat("--initial-cluster=ltrun=", peer_url),
                                         "--log-level=error"};
  std::vector<char*> argv = CStrings(args);
  const std::string log = Cat(dir, "/etcd.log");
  const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (log_fd < 0 || null_fd < 0) {
    if (log_fd >= 0) close(log_fd);
    if (null_fd >= 0) close(null_fd);
    return absl::InternalError(Cat("cannot open ", log, ": ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    // Dies with this ltrun however it ends; its own process group, so the
    // terminal's Ctrl-C reaches ltrun's teardown, not the rendezvous the
    // other nodes still need to hear this node's end.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    setpgid(0, 0);
    dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    execv(etcd.c_str(), argv.data());
    _exit(127);
  }
  const int fork_errno = errno;
  close(log_fd);
  close(null_fd);
  if (pid < 0) return absl::InternalError(Cat("fork: ", std::strerror(fork_errno)));
  self->pid_ = pid;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      self->pid_ = 0;
      const std::string why = LastMessage(log);
      return absl::UnavailableError(Cat("etcd for the c10d rendezvous did not start on ",
                                        self->endpoint_, why.empty() ? "" : ": ", why));
    }
    auto c = etcd::Client::Connect(self->endpoint_, std::chrono::milliseconds(500));
    if (c.ok()) {
      (*c)->set_call_timeout(std::chrono::milliseconds(1000));
      if ((*c)->Get("/ltd/ready").ok()) return self;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return absl::DeadlineExceededError(Cat("etcd for the c10d rendezvous on ", self->endpoint_,
                                         " did not serve within ", timeout.count() / 1000, " s"));
}

void PrivateEtcd::WaitForOthers(const std::string& run_id, std::chrono::milliseconds timeout) {
  if (pid_ == 0) return;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto c = etcd::Client::Connect(endpoint_, std::chrono::milliseconds(2000));
  if (!c.ok()) return;
  (*c)->set_call_timeout(std::chrono::milliseconds(1000));
  const std::string nodes = Cat("/ltd/runs/", run_id, "/nodes/");
  while (std::chrono::steady_clock::now() < deadline) {
    auto left = (*c)->GetPrefix(nodes);
    if (!left.ok() || left->kvs.empty()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void PrivateEtcd::Stop() {
  if (pid_ != 0) {
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
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    dir_.clear();
  }
}

PrivateEtcd::~PrivateEtcd() { Stop(); }

}  // namespace ltd
