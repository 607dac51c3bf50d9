#include "connection.h"

#include <grpcpp/create_channel_posix.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "bytes.h"
#include "rpc_error.h"

namespace ltd {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "ltctl: %s\n", DisplayEscape(message, Controls::kEscape).c_str());
  std::exit(kErrorExit);
}

namespace {

// How long a connect waits for room in ltd's listen queue.
constexpr int kConnectWaitSeconds = 10;

// A socket connected to ltd at `path`, or -errno. The connect blocks: while
// ltd's listen queue is full (another user flooding it with connects), it
// waits its turn in the kernel, up to kConnectWaitSeconds, where gRPC's own
// non-blocking connect would fail at once.
int ConnectSocket(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return -ENAMETOOLONG;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  timeval wait{.tv_sec = kConnectWaitSeconds, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof wait);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    close(fd);
    return -err;
  }
  wait = {};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof wait);
  return fd;
}

}  // namespace

int TryConnect(const std::string& path) {
  const int fd = ConnectSocket(path);
  if (fd < 0) return -fd;
  close(fd);
  return 0;
}

std::unique_ptr<v1::Ltd::Stub> Connect(const Globals& g) { return Connect(g, nullptr); }

std::unique_ptr<v1::Ltd::Stub> Connect(const Globals& g, int* gone) {
  constexpr size_t kMaxPath = sizeof(sockaddr_un::sun_path) - 1;
  if (g.socket.size() > kMaxPath) {
    Die("socket path " + g.socket + " is longer than the " + std::to_string(kMaxPath) +
        " bytes Unix sockets allow; use a shorter --socket");
  }
  // The OS's own words when it fails, so that "ltd is not running" reads
  // as such rather than as a gRPC transport error.
  const int fd = ConnectSocket(g.socket);
  if (fd == -EAGAIN) {
    Die("ltd at " + g.socket + " took no connection within " + std::to_string(kConnectWaitSeconds) +
        "s (its listen queue is full); try again");
  }
  if (fd < 0 && gone != nullptr) {
    *gone = -fd;
    return nullptr;
  }
  if (fd < 0) {
    Die("cannot reach ltd at " + g.socket + ": " + std::strerror(-fd) +
        "; start it with `ltd --socket " + g.socket + "` or `systemctl start ltd`");
  }
  // ltd bounds its replies (List pages, Show's texts); room to spare all the same.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  return v1::Ltd::NewStub(grpc::CreateCustomInsecureChannelFromFd("unix:" + g.socket, fd, args));
}

[[noreturn]] void DieRpc(const Globals& g, const grpc::Status& s) {
  Die(RpcErrorLine(s, g.socket, [&g] { return TryConnect(g.socket); }));
}

v1::Job ShowJob(const Globals& g, const std::string& job) {
  auto api = Connect(g);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::JobRef req;
  req.set_job(job);
  v1::Job found;
  grpc::Status s = api->Show(&ctx, req, &found);
  if (!s.ok()) DieRpc(g, s);
  return found;
}

std::string JobId(const Globals& g, const std::string& job) { return ShowJob(g, job).id(); }

}  // namespace ltd
