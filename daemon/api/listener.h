// ltd's Unix socket. ltd accepts connections itself, so that it learns the
// peer's uid/gid/pid (SO_PEERCRED) before handing the connection to gRPC;
// RPC handlers then look the caller up by the connection's peer name.
//
// The trust boundary: the caller's identity is what the kernel vouched for
// when it connected (SO_PEERCRED), nothing the request says. gRPC names a
// connection handed over by fd "fd:N" (pinned by listener_test), and a call
// holds its connection, so N is the caller's socket for as long as its
// handler runs; each entry also remembers the socket's inode, so a number
// reused by a later connection never answers with an earlier one's
// credentials. Entries of closed connections are dropped as new ones come.
#pragma once

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "client_relay.h"
#include "fd.h"

namespace ltd {

struct PeerCreds {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
  // The caller's supplementary groups when it connected (SO_PEERGROUPS):
  // what its jobs' ranks get. None when the kernel would not say.
  std::optional<std::vector<gid_t>> groups;
};

// Where descriptors a client sends over ltd's socket go (--fd-relay):
// kAuto refuses them where the kernel can (Linux 6.16) and relays the
// connections where it cannot (ClientRelay); kAlways relays them; kNever
// neither relays nor, on an older kernel, refuses.
enum class FdRelay { kAuto, kAlways, kNever };

class Listener {
 public:
  static constexpr int kListenBacklog = 256;

  // Binds `path`, refusing when another ltd answers there (still, after a
  // second); replaces a stale socket file left by an ltd that died. A user (root excepted) may
  // hold at most `max_per_user` connections at once (0: no limit); more are
  // closed at accept. When ltd runs out of fds, waiting connections are
  // refused at a bounded rate rather than left to spin the accept loop.
  static absl::StatusOr<std::unique_ptr<Listener>> Bind(const std::string& path,
                                                        size_t max_per_user = 0,
                                                        FdRelay relay = FdRelay::kAuto);
  // Takes a socket already bound and listening (socket activation). Its
  // file belongs to whoever made it (systemd) and stays when ltd stops.
  static absl::StatusOr<std::unique_ptr<Listener>> Adopt(Fd fd, size_t max_per_user = 0,
                                                         FdRelay relay = FdRelay::kAuto);

  // A user (root excepted) may open `per_second` connections a second, in
  // bursts of up to `burst`; past that, connections are closed as soon as
  // their credentials are read, before gRPC spends anything on them, so
  // one user's connect flood leaves the accept thread to the others.
  // 0: no bound. Call before Start.
  void set_connect_rate(double per_second, double burst) {
    connect_rate_ = per_second;
    connect_burst_ = burst;
  }
  ~Listener();  // stops accepting and removes the socket file it made

  // The path of the socket, for logs.
  const std::string& path() const { return path_; }

  // Starts handing accepted connections to `server` (through a relay,
  // where one is needed).
  absl::Status Start(grpc::Server* server);
  // Stops accepting; connections already handed over stay.
  void Stop();

  // The caller of an RPC, from its context's peer name.
  std::optional<PeerCreds> Lookup(const std::string& peer) const;
  // Connections known now (closed ones linger until the next sweep).
  size_t known_connections() const;
  // The relay of clients' connections; null where none is needed (tests).
  const ClientRelay* relay() const { return relay_.get(); }

 private:
  Listener(std::string path, Fd fd, size_t max_per_user)
      : path_(std::move(path)), fd_(std::move(fd)), max_per_user_(max_per_user) {}
  void AcceptLoop(grpc::Server* server);
  struct Peer {
    PeerCreds creds;
    dev_t dev = 0;
    ino_t ino = 0;
  };
  // Drops entries whose fd is closed or is another socket now. mu_ held.
  void SweepLocked();
  // How many connections `uid` has open (its stale entries dropped). mu_ held.
  size_t OpenOfLocked(uid_t uid);
  // Whether `uid` may connect now (takes a token); accept thread only.
  bool TakeConnectToken(uid_t uid, std::chrono::steady_clock::time_point now);

  std::string path_;
  bool owns_path_ = true;  // Bind made the file; Adopt did not
  FdRelay relay_mode_ = FdRelay::kAuto;
  bool refusing_ = false;               // the kernel refuses descriptors sent over it
  std::unique_ptr<ClientRelay> relay_;  // made by Start where needed
  Fd fd_;
  const size_t max_per_user_;
  Fd wake_[2];  // a pipe that tells the accept thread to stop
  std::thread thread_;
  mutable std::mutex mu_;
  std::map<int, Peer> peers_;  // guarded by mu_; by fd number
  size_t sweep_at_ = 64;       // guarded by mu_; sweep once peers_ grows past this
  double connect_rate_ = 0;
  double connect_burst_ = 0;
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point at;
  };
  std::map<uid_t, Bucket> buckets_;  // accept thread only
};

// Fails with a message naming the limit when `path` cannot fit sun_path.
absl::Status CheckSocketPath(const std::string& path);

}  // namespace ltd
