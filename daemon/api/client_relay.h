// ltd's clients' connections, read by ltd itself where the kernel cannot
// refuse the descriptors a client sends (SO_PASSRIGHTS is Linux 6.16's).
//
// Why: a descriptor sent over a Unix socket and not taken by its reader is
// closed by that read, on the reader's thread, and the close can last as
// long as its sender likes (a TCP socket set to linger with its send queue
// full). gRPC reads without taking descriptors, so on an older kernel one
// local user could hold a gRPC thread of ltd's, and every user's calls
// behind it.
//
// So each connection is relayed: gRPC gets one end of a socket pair, and
// one thread moves the bytes between the other end and the client, reading
// the client with room for every descriptor a message may carry. A client
// that sends one is none of ltd's (ltctl and the Python client send none):
// its connection is ended, and what it sent goes, unclosed, to an FdSink,
// whose child process closes it. A connection ended before its client's
// end was read may still hold such descriptors; the sink closes it too.
//
// Bounds: a connection holds at most one read (64 KiB) each way that the
// other side has not taken, and is not read further until it has; a turn
// reads at most four reads from a connection each way, so one that never
// pauses leaves the thread to the others.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "fd.h"

namespace ltd {

class FdSink;

class ClientRelay {
 public:
  static constexpr size_t kReadBytes = 64 << 10;
  static constexpr int kReadsATurn = 4;

  // Its thread running.
  static absl::StatusOr<std::unique_ptr<ClientRelay>> Start();
  // Ends every connection and stops the thread.
  ~ClientRelay();
  ClientRelay(const ClientRelay&) = delete;
  ClientRelay& operator=(const ClientRelay&) = delete;

  // Relays `client`, a connection of `uid`'s; the socket to hand gRPC in
  // its place. Any thread.
  absl::StatusOr<Fd> Take(Fd client, uid_t uid);
  // Lets go of `fd` without closing it on this thread (a connection
  // refused at accept may hold a client's descriptors). Any thread.
  void Drop(Fd fd);
  // Descriptors wait for a sink past FdSink::kMaxHeld: take no more
  // connections until they drain. Any thread.
  bool saturated() const { return saturated_.load(std::memory_order_relaxed); }

  // Tests: connections relayed now; the pid of the sink that takes
  // descriptors now (0: none yet).
  size_t connections() const { return connections_.load(); }
  pid_t sink_pid() const { return sink_pid_.load(); }
  // Batches of descriptors handed to the sink, ever.
  uint64_t sink_batches() const { return sink_batches_.load(); }

 private:
  ClientRelay() = default;
  struct Conn;
  struct Way;
  enum class Moved { kWaiting, kBudget, kDone, kFailed };

  void Loop();
  void TakeInbox();
  void Pump(uint64_t id);
  Moved Move(Conn& c, Way& w, bool from_client);
  // A read of the client: its bytes, or -1 with errno; a message that
  // carried descriptors ends the connection (EPIPE).
  ssize_t ReadClient(Conn& c);
  void End(uint64_t id);

  Fd epoll_;
  Fd wake_;  // an eventfd: the inbox has something, or stop
  std::thread thread_;
  std::mutex mu_;
  struct Incoming {
    Fd client;
    Fd server;
    uid_t uid = 0;
  };
  std::vector<Incoming> incoming_;  // guarded by mu_
  std::vector<Fd> drops_;           // guarded by mu_
  bool stop_ = false;               // guarded by mu_

  // The relay thread's own.
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  uint64_t next_id_ = 1;
  std::vector<uint64_t> again_;  // connections that used their turn's reads
  std::unique_ptr<FdSink> sink_;
  std::unique_ptr<char[]> scratch_;
  std::unordered_map<uid_t, std::chrono::steady_clock::time_point> warned_;

  std::atomic<bool> saturated_{false};
  std::atomic<size_t> connections_{0};
  std::atomic<pid_t> sink_pid_{0};
  std::atomic<uint64_t> sink_batches_{0};
};

}  // namespace ltd
