// lt-shim's server of the supervisor protocol (proto/shim.proto, api
// version 2): frames over the socket pair ltd started it with and over
// <job dir>/supervisor.sock, where a later ltd finds it. Each connection
// takes calls one frame at a time and answers on the loop thread; one that
// watches is a WatchSink of the service, whose live output is dropped past
// kMaxQueuedBytes (the log has every line), and a watcher that leaves even
// records unread past kMaxUnreadBytes is hung up on (it watches again).
// Loop thread.
#pragma once

#include <uv.h>

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "framed_pipe.h"
#include "loop.h"
#include "shim_service.h"
#include "uv_handle.h"

namespace ltd {

class SupervisorServer {
 public:
  static constexpr size_t kMaxQueuedBytes = 1 << 20;
  static constexpr size_t kMaxUnreadBytes = 64 << 20;
  // Only root reaches the socket; a bound all the same.
  static constexpr size_t kMaxConnections = 16;

  SupervisorServer(Loop& loop, ShimService& service) : loop_(loop), service_(service) {}
  ~SupervisorServer();
  SupervisorServer(const SupervisorServer&) = delete;
  SupervisorServer& operator=(const SupervisorServer&) = delete;

  // Serves on a new socket at `path` (an old one there is removed).
  absl::Status Listen(const std::string& path);
  // Serves the connected socket `fd` (ltd's end of the pair), taking it.
  absl::Status Adopt(int fd);
  // Stops serving: the socket is removed, every connection closed.
  void Close();

 private:
  class Connection;
  void OnConnection();
  void Gone(Connection* connection);

  Loop& loop_;
  ShimService& service_;
  std::string path_;
  UvPtr<uv_pipe_t> listener_;
  std::map<Connection*, std::shared_ptr<Connection>> connections_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for posted closures
};

}  // namespace ltd
