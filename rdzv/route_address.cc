#include "route_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "fd.h"

namespace ltd::rdzv {

absl::StatusOr<std::string> AddressTowards(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError("'" + endpoint + "' is not HOST:PORT");
  }
  std::string host = endpoint.substr(0, colon);
  const std::string port = endpoint.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError("getaddrinfo(" + host + "): " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(found, freeaddrinfo);
  std::string why = "no address";
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    Fd s(socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (s.get() < 0) {
      why = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    // A UDP connect only picks the route and the source address.
    if (connect(s.get(), a->ai_addr, a->ai_addrlen) != 0) {
      why = std::string("connect: ") + std::strerror(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (getsockname(s.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0) {
      why = std::string("getsockname: ") + std::strerror(errno);
      continue;
    }
    char text[INET6_ADDRSTRLEN] = {};
    const void* addr =
        local.ss_family == AF_INET6
            ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(&local)->sin6_addr)
            : static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(&local)->sin_addr);
    if (inet_ntop(local.ss_family, addr, text, sizeof text) == nullptr) {
      why = std::string("inet_ntop: ") + std::strerror(errno);
      continue;
    }
    return std::string(text);
  }
  return absl::UnavailableError("no route to " + endpoint + ": " + why);
}

}  // namespace ltd::rdzv
