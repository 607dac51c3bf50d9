// Socket activation: the listening socket systemd holds for ltd (ltd.socket)
// and passes on start as fd 3 with LISTEN_FDS=1 and LISTEN_PID. systemd
// keeps it open across ltd's restarts, so clients wait in its backlog
// instead of failing while ltd restarts.
#pragma once

#include <optional>

#include "absl/status/statusor.h"
#include "fd.h"

namespace ltd {

// The socket systemd passed, close-on-exec, LISTEN_* cleared from the
// environment; nullopt when ltd was started by hand. Fails when what was
// passed is not exactly one listening Unix stream socket.
absl::StatusOr<std::optional<Fd>> ListeningSocketFromSystemd();

}  // namespace ltd
