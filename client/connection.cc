#include "connection.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "bytes.h"

namespace ltd {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "ltctl: %s\n", DisplayEscape(message, Controls::kEscape).c_str());
  std::exit(kErrorExit);
}

int TryConnect(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return ENAMETOOLONG;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  const int err = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 ? 0 : errno;
  close(fd);
  return err;
}

namespace {

// Reachability first, with the OS's own words, so that "ltd is not running"
// reads as such rather than as a gRPC transport error.
void CheckReachable(const std::string& path) {
  constexpr size_t kMaxPath = sizeof(sockaddr_un::sun_path) - 1;
  if (path.size() > kMaxPath) {
    Die("socket path " + path + " is longer than the " + std::to_string(kMaxPath) +
        " bytes Unix sockets allow; use a shorter --socket");
  }
  if (const int err = TryConnect(path); err != 0) {
    Die("cannot reach ltd at " + path + ": " + std::strerror(err) +
        "; start it with `ltd --socket " + path + "` or `systemctl start ltd`");
  }
}

}  // namespace

std::unique_ptr<v1::Ltd::Stub> Connect(const Globals& g) {
  CheckReachable(g.socket);
  // ltd bounds its replies (List pages, Show's texts); room to spare all the same.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  return v1::Ltd::NewStub(
      grpc::CreateCustomChannel("unix:" + g.socket, grpc::InsecureChannelCredentials(), args));
}

[[noreturn]] void DieRpc(const Globals& g, const grpc::Status& s) {
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE &&
      s.error_message().find("connect") != std::string::npos) {
    Die("cannot reach ltd at " + g.socket + ": " + s.error_message());
  }
  Die(s.error_message());
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
