#include "client_relay.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "fd_sink.h"
#include "posix_error.h"
#include "spdlog/spdlog.h"

namespace ltd {
namespace {

// Epoll data: 0 the wake eventfd; else (id << 2) | a tag.
constexpr uint64_t kClient = 1;
constexpr uint64_t kServer = 2;
constexpr uint64_t kSink = 3;
// The kernel's SCM_MAX_FD: the most descriptors one message carries.
constexpr size_t kFdsAMessage = 253;
// While the sink has work, the loop looks at it again this often.
constexpr int kSinkRetryMs = 500;

}  // namespace

// One direction of a connection.
struct ClientRelay::Way {
  std::string pending;  // read, not yet taken by the other side
  bool eof = false;     // the reading side ended
  bool shut = false;    // and the writing side was told (SHUT_WR)
};

struct ClientRelay::Conn {
  Fd client;
  Fd server;
  uid_t uid = 0;
  Way up;                // client to gRPC
  Way down;              // gRPC to client
  bool refused = false;  // sent descriptors: ended, never read again
};

absl::StatusOr<std::unique_ptr<ClientRelay>> ClientRelay::Start() {
  auto relay = std::unique_ptr<ClientRelay>(new ClientRelay());
  relay->epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!relay->epoll_.valid()) return PosixError("epoll_create1", "the client relay", errno);
  relay->wake_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!relay->wake_.valid()) return PosixError("eventfd", "the client relay", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  if (epoll_ctl(relay->epoll_.get(), EPOLL_CTL_ADD, relay->wake_.get(), &ev) != 0) {
    return PosixError("epoll_ctl", "the client relay", errno);
  }
  relay->scratch_ = std::make_unique<char[]>(kReadBytes);
  auto sink = FdSink::Create(relay->epoll_.get(), kSink);
  if (!sink.ok()) return sink.status();
  relay->sink_ = std::move(*sink);
  ClientRelay* self = relay.get();
  relay->thread_ = std::thread([self] { self->Loop(); });
  return relay;
}

ClientRelay::~ClientRelay() {
  {
    const std::lock_guard lock(mu_);
    stop_ = true;
  }
  const uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<Fd> ClientRelay::Take(Fd client, uid_t uid) {
  int sv[2];
  // Both ends non-blocking: gRPC takes a handed-over fd as it is.
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) {
    const int err = errno;
    Drop(std::move(client));
    return PosixError("socketpair", "a relayed connection", err);
  }
  Fd grpc_end(sv[0]);
  Fd server(sv[1]);
  (void)fcntl(client.get(), F_SETFL, O_NONBLOCK);
  // Out-of-band bytes (and what they carry) come in line, through the same
  // read that takes descriptors, never dropped by a read past them.
  const int on = 1;
  (void)setsockopt(client.get(), SOL_SOCKET, SO_OOBINLINE, &on, sizeof on);
  {
    const std::lock_guard lock(mu_);
    incoming_.push_back({std::move(client), std::move(server), uid});
  }
  const uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof one);
  return grpc_end;
}

namespace {

// Closes a client's socket here when nothing is left in it, which is
// known once it takes no more: descriptors ride on bytes, and after
// SHUT_RD its peer's sends fail. Else it stays for the sink.
bool ClosedIfEmpty(Fd& fd) {
  (void)shutdown(fd.get(), SHUT_RDWR);  // its peer sees the end now, not at the sink's close
  int unread = 0;
  if (ioctl(fd.get(), FIONREAD, &unread) != 0 || unread != 0) return false;
  fd.reset();
  return true;
}

}  // namespace

void ClientRelay::Drop(Fd fd) {
  if (!fd.valid() || ClosedIfEmpty(fd)) return;
  {
    const std::lock_guard lock(mu_);
    drops_.push_back(std::move(fd));
  }
  const uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof one);
}

void ClientRelay::Loop() {
  // A sink from the start (made on this thread, it dies with it): one is
  // there before ltd may run short of fds, and its own fds are counted.
  sink_->Flush();
  sink_pid_.store(sink_->active_pid());
  epoll_event events[64];
  for (;;) {
    const int timeout = !again_.empty() ? 0 : sink_->busy() ? kSinkRetryMs : -1;
    const int n = epoll_wait(epoll_.get(), events, 64, timeout);
    if (n < 0 && errno != EINTR) {
      spdlog::error("the client relay's epoll_wait: {}", std::strerror(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t key = events[i].data.u64;
      if (key == 0) {
        uint64_t count = 0;
        (void)!read(wake_.get(), &count, sizeof count);
        {
          const std::lock_guard lock(mu_);
          if (stop_) {
            while (!conns_.empty()) End(conns_.begin()->first);
            return;
          }
        }
        TakeInbox();
      } else if ((key & 3) == kSink) {
        sink_->OnExit(static_cast<pid_t>(key >> 2));
      } else {
        Pump(key >> 2);
      }
    }
    std::vector<uint64_t> again;
    again.swap(again_);
    for (uint64_t id : again) Pump(id);
    if (sink_->busy()) sink_->Flush();
    saturated_.store(sink_->saturated(), std::memory_order_relaxed);
    sink_pid_.store(sink_->active_pid());
    sink_batches_.store(sink_->sent());
  }
}

void ClientRelay::TakeInbox() {
  std::vector<Incoming> incoming;
  std::vector<Fd> drops;
  {
    const std::lock_guard lock(mu_);
    incoming.swap(incoming_);
    drops.swap(drops_);
  }
  if (!drops.empty()) sink_->Drop(std::move(drops));
  for (Incoming& in : incoming) {
    const uint64_t id = next_id_++;
    auto conn = std::make_unique<Conn>();
    conn->client = std::move(in.client);
    conn->server = std::move(in.server);
    conn->uid = in.uid;
    // Edge-triggered: each side is read until it would block, or until
    // the turn's reads are spent (then the connection goes on next turn).
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.u64 = (id << 2) | kClient;
    const bool added = epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, conn->client.get(), &ev) == 0;
    ev.data.u64 = (id << 2) | kServer;
    if (!added || epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, conn->server.get(), &ev) != 0) {
      spdlog::warn("the client relay's epoll_ctl: {}; closing a connection", std::strerror(errno));
      (void)epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, conn->client.get(), nullptr);
      std::vector<Fd> drop;
      drop.push_back(std::move(conn->client));
      sink_->Drop(std::move(drop));
      continue;
    }
    conns_.emplace(id, std::move(conn));
    connections_.store(conns_.size());
    Pump(id);
  }
}

void ClientRelay::Pump(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  const Moved up = Move(c, c.up, true);
  const Moved down = c.refused ? Moved::kFailed : Move(c, c.down, false);
  // gRPC's end closed and all it said passed on: the connection is over,
  // whether or not the client has closed its own (one that never does must
  // not hold fds of ltd's past gRPC's count of its connections).
  if (c.refused || up == Moved::kFailed || down == Moved::kFailed || down == Moved::kDone) {
    End(id);
    return;
  }
  if (up == Moved::kBudget || down == Moved::kBudget) again_.push_back(id);
}

ClientRelay::Moved ClientRelay::Move(Conn& c, Way& w, bool from_client) {
  const int from = from_client ? c.client.get() : c.server.get();
  const int to = from_client ? c.server.get() : c.client.get();
  for (int reads = 0;; ++reads) {
    while (!w.pending.empty()) {
      const ssize_t k = send(to, w.pending.data(), w.pending.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k < 0) {
        if (errno == EINTR) continue;
        return errno == EAGAIN ? Moved::kWaiting : Moved::kFailed;
      }
      w.pending.erase(0, static_cast<size_t>(k));
    }
    if (w.eof) {
      if (!w.shut) (void)shutdown(to, SHUT_WR);
      w.shut = true;
      return Moved::kDone;
    }
    if (reads == kReadsATurn) return Moved::kBudget;
    const ssize_t n =
        from_client ? ReadClient(c) : recv(from, scratch_.get(), kReadBytes, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN ? Moved::kWaiting : Moved::kFailed;
    }
    if (n == 0) {
      w.eof = true;
      continue;
    }
    ssize_t k = send(to, scratch_.get(), static_cast<size_t>(n), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k < 0) {
      if (errno != EAGAIN && errno != EINTR) return Moved::kFailed;
      k = 0;
    }
    if (k < n) w.pending.assign(scratch_.get() + k, static_cast<size_t>(n - k));
  }
}

ssize_t ClientRelay::ReadClient(Conn& c) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFdsAMessage)];
  iovec iov{scratch_.get(), kReadBytes};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  const ssize_t n = recvmsg(c.client.get(), &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0 || (m.msg_controllen == 0 && (m.msg_flags & MSG_CTRUNC) == 0)) return n;
  // Descriptors: taken, so that no close of theirs runs here, and handed
  // to the sink. ltd asked for no other kind of control message.
  std::vector<Fd> fds;
  for (cmsghdr* h = CMSG_FIRSTHDR(&m); h != nullptr; h = CMSG_NXTHDR(&m, h)) {
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
      fds.emplace_back(fd);
    }
  }
  const auto now = std::chrono::steady_clock::now();
  auto [warned, fresh] = warned_.try_emplace(c.uid, now);
  if (fresh || now - warned->second >= std::chrono::minutes(1)) {
    warned->second = now;
    spdlog::warn(
        "uid {} sent {} file descriptor(s) over ltd's socket, which no client of ltd's does; "
        "closing that connection",
        c.uid, fds.size());
  }
  if (warned_.size() > 1024) {
    std::erase_if(warned_,
                  [&](const auto& w) { return now - w.second >= std::chrono::minutes(1); });
  }
  sink_->Drop(std::move(fds));
  c.refused = true;
  errno = EPIPE;
  return -1;
}

void ClientRelay::End(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  (void)epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.client.get(), nullptr);
  (void)epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.server.get(), nullptr);
  c.server.reset();  // gRPC's end sees the connection end
  if (c.up.eof && !c.refused) {
    c.client.reset();  // read to its end: nothing unread can hold a descriptor
  } else if (!ClosedIfEmpty(c.client)) {
    std::vector<Fd> drop;
    drop.push_back(std::move(c.client));
    sink_->Drop(std::move(drop));
  }
  conns_.erase(it);
  connections_.store(conns_.size());
}

}  // namespace ltd
