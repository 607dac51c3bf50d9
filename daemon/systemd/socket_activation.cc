#include "socket_activation.h"

#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cstring>

#include "str_util.h"

namespace ltd {

absl::StatusOr<std::optional<Fd>> ListeningSocketFromSystemd() {
  // unset_environment=1: nothing ltd starts inherits LISTEN_*. sd_listen_fds
  // answers 0 unless LISTEN_PID is this process, and sets FD_CLOEXEC.
  const int n = sd_listen_fds(1);
  if (n < 0) {
    return absl::InvalidArgumentError(
        Cat("the sockets systemd passed (LISTEN_FDS) are not usable: ", std::strerror(-n),
            "; check ltd.socket"));
  }
  if (n == 0) return std::nullopt;
  if (n > 1) {
    for (int fd = SD_LISTEN_FDS_START; fd < SD_LISTEN_FDS_START + n; ++fd) close(fd);
    return absl::InvalidArgumentError(Cat("systemd passed ", n,
                                          " sockets; ltd takes one: give ltd.socket a single "
                                          "ListenStream= with the socket's path"));
  }
  Fd fd(SD_LISTEN_FDS_START);
  const int r = sd_is_socket_unix(fd.get(), SOCK_STREAM, /*listening=*/1, nullptr, 0);
  if (r <= 0) {
    return absl::InvalidArgumentError(
        Cat("the socket systemd passed is not a listening Unix stream socket",
            r < 0 ? Cat(" (", std::strerror(-r), ")") : std::string(),
            "; ltd.socket needs ListenStream=/run/ltd/ltd.sock"));
  }
  return std::optional<Fd>(std::move(fd));
}

}  // namespace ltd
