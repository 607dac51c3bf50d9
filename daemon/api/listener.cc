#include "listener.h"

#include <fcntl.h>
#include <grpcpp/server_posix.h>
#include <limits.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "fd_sink.h"
#include "job_store.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

// How long a socket that accepts connections must go on doing so before
// ltd takes it for another ltd's (see Bind).
constexpr std::chrono::milliseconds kStaleListenerWait{1000};

#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83  // Linux 6.16's; older headers lack it
#endif

// A client's file descriptors stay its own. One sent over the socket is
// closed by the read that drops it, on a thread of ltd's (the accept
// loop's, gRPC's), and that close can wait as long as its user likes: a
// TCP socket set to linger with its send queue full, a file whose lock a
// stalled FUSE server must release. Linux 6.16 refuses the send
// (SO_PASSRIGHTS); the sockets accepted take the listener's setting.
// Whether it is refused so; else ltd relays its clients (client_relay.h).
constexpr int kOff = 0;
bool RefuseDescriptors(int fd, const std::string& path, FdRelay relay) {
  if (relay == FdRelay::kAlways) return false;
  if (setsockopt(fd, SOL_SOCKET, SO_PASSRIGHTS, &kOff, sizeof kOff) == 0) return true;
  if (relay == FdRelay::kNever) {
    spdlog::warn(
        "this kernel cannot refuse file descriptors sent over {} (SO_PASSRIGHTS, Linux 6.16), and "
        "--fd-relay is no: a local user can hold a thread of ltd's in closing one",
        path);
  }
  return false;
}

}  // namespace

absl::Status CheckSocketPath(const std::string& path) {
  constexpr size_t kMax = sizeof(sockaddr_un::sun_path) - 1;
  if (path.empty()) return absl::InvalidArgumentError("the socket path is empty");
  if (path.size() > kMax) {
    return absl::InvalidArgumentError(Cat("socket path ", path, " is ", path.size(),
                                          " bytes; Unix sockets allow at most ", kMax,
                                          ": choose a shorter --socket"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Listener>> Listener::Bind(const std::string& path,
                                                         size_t max_per_user, FdRelay relay) {
  if (auto s = CheckSocketPath(path); !s.ok()) return s;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);

  Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return PosixError("socket", "AF_UNIX", errno);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EADDRINUSE) return PosixError("bind", path, errno);
    // A socket file is there: is an ltd behind it, or is it stale? A
    // killed ltd's listening socket outlives it while a child it was
    // starting has not yet reached its exec (which closes it): a restart
    // right after a SIGKILL must not take that for another ltd. A live
    // ltd still listens after kStaleListenerWait.
    const auto give_up = std::chrono::steady_clock::now() + kStaleListenerWait;
    for (;;) {
      Fd probe(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
      if (connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) break;
      if (std::chrono::steady_clock::now() >= give_up) {
        return absl::AlreadyExistsError(Cat("another ltd is already listening on ", path,
                                            "; stop it first or give this one another --socket"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
      return absl::AlreadyExistsError(
          Cat(path, " exists and is not a socket; remove it or choose another --socket"));
    }
    unlink(path.c_str());
    if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      return PosixError("bind", path, errno);
    }
  }
  // Every local user may submit; who they are comes from SO_PEERCRED.
  if (chmod(path.c_str(), 0666) != 0) return PosixError("chmod", path, errno);
  // A short queue: a connect waits behind every one queued before it, and
  // under one user's connect flood the queue is always full, so its depth
  // is the others' delay. ltctl and the Python client connect blocking:
  // while it is full they wait in the kernel for room, in turn with the
  // flood, instead of failing.
  const bool refusing = RefuseDescriptors(fd.get(), path, relay);
  if (listen(fd.get(), kListenBacklog) != 0) return PosixError("listen", path, errno);
  auto listener = std::unique_ptr<Listener>(new Listener(path, std::move(fd), max_per_user));
  listener->relay_mode_ = relay;
  listener->refusing_ = refusing;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return PosixError("pipe2", "listener", errno);
  listener->wake_[0].reset(p[0]);
  listener->wake_[1].reset(p[1]);
  return listener;
}

absl::StatusOr<std::unique_ptr<Listener>> Listener::Adopt(Fd fd, size_t max_per_user,
                                                          FdRelay relay) {
  sockaddr_un addr{};
  socklen_t len = sizeof addr;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return PosixError("getsockname", "the socket passed by systemd", errno);
  }
  std::string path = len > offsetof(sockaddr_un, sun_path)
                         ? std::string(addr.sun_path, strnlen(addr.sun_path, sizeof addr.sun_path))
                         : std::string("(unnamed)");
  const bool refusing = RefuseDescriptors(fd.get(), path, relay);
  auto listener =
      std::unique_ptr<Listener>(new Listener(std::move(path), std::move(fd), max_per_user));
  listener->owns_path_ = false;
  listener->relay_mode_ = relay;
  listener->refusing_ = refusing;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return PosixError("pipe2", "listener", errno);
  listener->wake_[0].reset(p[0]);
  listener->wake_[1].reset(p[1]);
  return listener;
}

Listener::~Listener() {
  Stop();
  if (owns_path_) unlink(path_.c_str());
}

absl::Status Listener::Start(grpc::Server* server) {
  if (!refusing_ && relay_mode_ != FdRelay::kNever) {
    auto relay = ClientRelay::Start();
    if (!relay.ok()) return relay.status();
    relay_ = std::move(*relay);
    if (relay_mode_ == FdRelay::kAuto) {
      spdlog::info(
          "this kernel cannot refuse file descriptors sent over {} (SO_PASSRIGHTS, Linux 6.16): "
          "ltd relays its clients' connections, taking any sent",
          path_);
    }
  }
  thread_ = std::thread([this, server] { AcceptLoop(server); });
  return absl::OkStatus();
}

void Listener::Stop() {
  if (!thread_.joinable()) return;
  (void)!write(wake_[1].get(), "x", 1);
  thread_.join();
}

namespace {

constexpr int kSweepEveryMs = 2000;
constexpr int kStarvedPauseMs = 100;
constexpr int kAcceptsPerPoll = 256;
// The accept thread's niceness: ahead of the users' processes while it
// serves them, behind them while it refuses a flood (see AcceptLoop).
constexpr int kServingNice = -5;
constexpr int kRefusingNice = 10;
constexpr auto kFloodQuiet = std::chrono::seconds(1);

// The socket behind fd `fd` now, if it is one.
bool SocketIdentity(int fd, dev_t* dev, ino_t* ino) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  *dev = st.st_dev;
  *ino = st.st_ino;
  return true;
}

// The supplementary groups of the process that connected on `fd`, as the
// kernel saved them at its connect; none when it would not say.
std::optional<std::vector<gid_t>> PeerGroups(int fd) {
  std::vector<gid_t> groups(32);
  for (int tries = 0; tries < 2; ++tries) {
    socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      return groups;
    }
    // ERANGE: len is what they need, at most the kernel's NGROUPS_MAX.
    if (errno != ERANGE || len / sizeof(gid_t) > NGROUPS_MAX) break;
    groups.resize(len / sizeof(gid_t));
  }
  return std::nullopt;
}

}  // namespace

std::optional<PeerCreds> Listener::Lookup(const std::string& peer) const {
  int fd = -1;
  if (!peer.starts_with("fd:") || !absl::SimpleAtoi(peer.substr(3), &fd)) return std::nullopt;
  std::lock_guard lock(mu_);
  auto it = peers_.find(fd);
  if (it == peers_.end()) return std::nullopt;
  dev_t dev = 0;
  ino_t ino = 0;
  if (!SocketIdentity(fd, &dev, &ino) || dev != it->second.dev || ino != it->second.ino) {
    return std::nullopt;  // not the connection these credentials came with
  }
  return it->second.creds;
}

size_t Listener::known_connections() const {
  std::lock_guard lock(mu_);
  return peers_.size();
}

void Listener::SweepLocked() {
  for (auto it = peers_.begin(); it != peers_.end();) {
    dev_t dev = 0;
    ino_t ino = 0;
    const bool same =
        SocketIdentity(it->first, &dev, &ino) && dev == it->second.dev && ino == it->second.ino;
    it = same ? std::next(it) : peers_.erase(it);
  }
  // Amortised: the next sweep once as many again have come.
  sweep_at_ = std::max<size_t>(64, peers_.size() * 2);
}

void Listener::AcceptLoop(grpc::Server* server) {
  // Ahead of the users' processes for the CPU (nice -5, root only): one
  // user's busy processes must not outrun the thread that drains the
  // backlog every user's connect waits in. But while it refuses a flood of
  // connects its work is the flooder's doing: it drops behind the users'
  // processes then (nice 10), so that refusing takes the CPU of nobody
  // else's ltctl, and goes back ahead once no connect was refused for a
  // second. Measured (bench/attack_bench.py): another user's `ps` under a
  // flood by two processes took 25 ms with nice -5 throughout, 18 ms so.
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  (void)setpriority(PRIO_PROCESS, tid, kServingNice);
  std::optional<std::chrono::steady_clock::time_point> refusing;  // since the last refusal
  const auto refused = [&](std::chrono::steady_clock::time_point now) {
    if (!refusing) (void)setpriority(PRIO_PROCESS, tid, kRefusingNice);
    refusing = now;
  };
  // One fd held back for when the table is full: closing it lets ltd take
  // a waiting connection off the backlog and refuse it at once, instead of
  // leaving it (and poll) ready for ever.
  Fd reserve(open("/dev/null", O_RDONLY | O_CLOEXEC));
  bool starved = false;
  std::set<uid_t> over_limit;  // users told of their limit, until they are under it
  // Users told of the connect rate, and when.
  std::map<uid_t, std::chrono::steady_clock::time_point> over_rate;
  // The backlog is drained without a poll between accepts (the socket is
  // non-blocking), so that one user's flood of connects, most closed at
  // once, does not fill it while others wait to be taken off it; the stop
  // pipe is looked at every kAcceptsPerPoll accepts.
  const int flags = fcntl(fd_.get(), F_GETFL);
  if (flags >= 0) (void)fcntl(fd_.get(), F_SETFL, flags | O_NONBLOCK);
  int draining = 0;  // accepts since the last poll, while the backlog gives
  // A connection refused or dropped: with a relay, its sink closes it, for
  // its queue may hold a client's descriptors (see RefuseDescriptors).
  const auto let_go = [this](int conn) {
    if (relay_) {
      relay_->Drop(Fd(conn));
    } else {
      close(conn);
    }
  };
  bool relay_full = false;
  for (;;) {
    pollfd fds[2] = {{fd_.get(), POLLIN, 0}, {wake_[0].get(), POLLIN, 0}};
    if (draining >= kAcceptsPerPoll) draining = 0;
    const int ready = draining > 0 ? 1 : poll(fds, 2, kSweepEveryMs);
    if (ready < 0) {
      if (errno == EINTR) continue;
      spdlog::error("poll on {}: {}", path_, std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    if (refusing && std::chrono::steady_clock::now() - *refusing >= kFloodQuiet) {
      (void)setpriority(PRIO_PROCESS, tid, kServingNice);
      refusing.reset();
    }
    if (ready == 0) {  // quiet: forget connections gRPC has closed meanwhile
      std::lock_guard lock(mu_);
      SweepLocked();
      // And users whose buckets are full again: they cost nothing.
      const auto now = std::chrono::steady_clock::now();
      std::erase_if(over_rate,
                    [&](const auto& w) { return now - w.second >= std::chrono::minutes(1); });
      for (auto it = buckets_.begin(); it != buckets_.end();) {
        const double secs = std::chrono::duration<double>(now - it->second.at).count();
        it = it->second.tokens + secs * connect_rate_ >= connect_burst_ ? buckets_.erase(it)
                                                                        : std::next(it);
      }
      continue;
    }
    if (relay_ && relay_->saturated()) {
      // Every sink is stuck where even SIGKILL cannot end it: no more
      // connections, whose ends could only add to what waits.
      if (!relay_full) {
        spdlog::error(
            "{} client descriptors wait for a sink to close them, and every sink is stuck in "
            "the kernel; taking no connections until they drain",
            FdSink::kMaxHeld);
        relay_full = true;
      }
      pollfd wake{wake_[0].get(), POLLIN, 0};
      if (poll(&wake, 1, kStarvedPauseMs) > 0) return;
      draining = 0;
      continue;
    }
    if (relay_full) {
      spdlog::info("client descriptors closed; taking connections again");
      relay_full = false;
    }
    const int conn = accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    draining = conn >= 0 ? draining + 1 : 0;
    if (conn < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        if (!starved) {
          spdlog::error("out of file descriptors ({}); refusing connections until some close",
                        std::strerror(errno));
          starved = true;
        }
        reserve.reset();
        const int drop = accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (drop >= 0) let_go(drop);
        reserve.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
        // Pressure lasts: look again in a while, never in a loop.
        pollfd wake{wake_[0].get(), POLLIN, 0};
        if (poll(&wake, 1, kStarvedPauseMs) > 0) return;
      } else if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        spdlog::warn("accept on {}: {}", path_, std::strerror(errno));
      }
      continue;
    }
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      spdlog::warn("SO_PEERCRED: {}; dropping the connection", std::strerror(errno));
      let_go(conn);
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (cred.uid != 0 && !TakeConnectToken(cred.uid, now)) {
      // Once a minute at most per user: a flood must not flood the log too.
      auto [warned, fresh] = over_rate.try_emplace(cred.uid, now);
      if (fresh || now - warned->second >= std::chrono::minutes(1)) {
        warned->second = now;
        spdlog::warn(
            "uid {} connects more than {} times a second (--user-max-connects); "
            "refusing the excess",
            cred.uid, connect_rate_);
      }
      let_go(conn);
      refused(now);
      continue;
    }
    // A connection systemd queued before Adopt set the listener has not
    // its setting: refuse the descriptors it sends from now on.
    if (!owns_path_ && refusing_) {
      (void)setsockopt(conn, SOL_SOCKET, SO_PASSRIGHTS, &kOff, sizeof kOff);
    }
    Peer peer;
    peer.creds = PeerCreds{cred.uid, cred.gid, cred.pid, PeerGroups(conn)};
    {
      std::lock_guard lock(mu_);
      if (peers_.size() > sweep_at_) SweepLocked();
      if (max_per_user_ > 0 && cred.uid != 0 && OpenOfLocked(cred.uid) >= max_per_user_) {
        if (over_limit.insert(cred.uid).second) {
          spdlog::warn("uid {} holds {} connections (--user-max-connections); refusing more",
                       cred.uid, max_per_user_);
        }
        let_go(conn);
        refused(now);
        continue;
      }
      over_limit.erase(cred.uid);
    }
    // gRPC reads the connection itself, or the relay's end in its place.
    int grpc_fd = conn;
    if (relay_) {
      auto end = relay_->Take(Fd(conn), cred.uid);
      if (!end.ok()) {
        // Its socket pair refused: out of fds (or kernel memory), as above.
        if (!starved) {
          spdlog::error("cannot relay a connection ({}); refusing connections until fds free up",
                        std::string(end.status().message()));
          starved = true;
        }
        pollfd wake{wake_[0].get(), POLLIN, 0};
        if (poll(&wake, 1, kStarvedPauseMs) > 0) return;
        continue;
      }
      grpc_fd = end->release();
    }
    if (starved) {
      spdlog::info("file descriptors available again; accepting connections");
      starved = false;
    }
    if (!SocketIdentity(grpc_fd, &peer.dev, &peer.ino)) {
      let_go(grpc_fd);
      continue;
    }
    {
      // gRPC names a connection handed over by fd "fd:N"; N is unique among
      // open connections, and a reused N is overwritten here first.
      std::lock_guard lock(mu_);
      peers_[grpc_fd] = peer;
    }
    // gRPC may start a thread of its pool in this call, and a new thread
    // keeps its creator's niceness for good: at 0, as ltd's other threads,
    // not ahead of every user's processes, nor behind them once a flood
    // is over.
    (void)setpriority(PRIO_PROCESS, tid, 0);
    grpc::AddInsecureChannelFromFd(server, grpc_fd);
    (void)setpriority(PRIO_PROCESS, tid, refusing ? kRefusingNice : kServingNice);
  }
}

bool Listener::TakeConnectToken(uid_t uid, std::chrono::steady_clock::time_point now) {
  if (connect_rate_ <= 0) return true;
  auto [it, fresh] = buckets_.try_emplace(uid, Bucket{connect_burst_, now});
  Bucket& b = it->second;
  if (!fresh) {
    const double secs = std::chrono::duration<double>(now - b.at).count();
    b.tokens = std::min(connect_burst_, b.tokens + secs * connect_rate_);
    b.at = now;
  }
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

size_t Listener::OpenOfLocked(uid_t uid) {
  size_t open = 0;
  for (auto it = peers_.begin(); it != peers_.end();) {
    if (it->second.creds.uid != uid) {
      ++it;
      continue;
    }
    dev_t dev = 0;
    ino_t ino = 0;
    if (SocketIdentity(it->first, &dev, &ino) && dev == it->second.dev && ino == it->second.ino) {
      ++open;
      ++it;
    } else {
      it = peers_.erase(it);
    }
  }
  return open;
}

}  // namespace ltd
