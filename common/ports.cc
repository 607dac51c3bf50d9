#include "ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "fd.h"
#include "posix_error.h"

namespace ltd {

absl::StatusOr<int> KernelPortAllocator::Pick(const std::set<int>& in_use) {
  // The rendezvous store binds MASTER_PORT on all addresses, so ask for a
  // port free on all of them; bind(0) picks from the ephemeral range.
  for (int attempt = 0; attempt < 32; ++attempt) {
    Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return PosixError("socket", "AF_INET", errno);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = 0;
    if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      return PosixError("bind", "0.0.0.0:0", errno);
    }
    socklen_t len = sizeof addr;
    if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return PosixError("getsockname", "0.0.0.0:0", errno);
    }
    const int port = ntohs(addr.sin_port);
    if (!in_use.contains(port)) return port;
  }
  return absl::ResourceExhaustedError("no free TCP port for MASTER_PORT after 32 tries");
}

}  // namespace ltd
