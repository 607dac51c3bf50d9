// Descriptors ltd must let go of without closing them on a thread of its
// own: a client's, or a client's connection that may still hold some
// unread. The last close of a descriptor runs its file's release on the
// closing thread, and that can take as long as the descriptor's owner
// likes (a TCP socket set to linger with its send queue full, a lock that
// a stalled FUSE server must release).
//
// So ltd's close must never be the last. Descriptors go, a batch a
// message, into a vault: a socket pair whose two ends ltd holds for good,
// so that what is in flight there holds a reference no one but a sink can
// take. Only then does ltd close its own copies, and it writes a token
// (a byte down a pipe) for the batch. A sink reads a token, then one
// batch, with no room for descriptors: that read drops them, and the last
// close is the sink's. Without the token order a sink could take a batch
// before ltd's close, making ltd's the last.
//
// A sink is a copy of ltd (clone3, no exec) that has fully become
// `nobody`, not dumpable, holding none of ltd's descriptors but the
// vault's end and the tokens' and none of its environment. A sink that
// reads no batch for a second, batches and tokens waiting, is stuck in a
// close: it is killed (SIGKILL ends the wait; a dying process closes
// without lingering) and another started, which goes on where it
// stopped. A sink killed by someone else between a token and its batch
// loses a token; when no batch was read for a second, batches short of
// tokens get theirs again. At most kMaxSinks live at once, stuck ones included. What the
// vault cannot take now waits, up to kMaxHeld (`saturated`: ltd then
// takes no connections until it drains). Sinks die with the thread that
// made them (PR_SET_PDEATHSIG).
//
// One thread only: the client relay's (client_relay.h).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "fd.h"

namespace ltd {

class FdSink {
 public:
  static constexpr size_t kMaxSinks = 16;
  static constexpr size_t kMaxHeld = 4096;

  // Sinks' pidfds are added to `epoll_fd` with data `(pid << 2) | tag`
  // (tag < 4); the owner calls OnExit for each such event. No sink runs
  // until the first Flush.
  static absl::StatusOr<std::unique_ptr<FdSink>> Create(int epoll_fd, uint64_t tag);
  // Kills the sinks and reaps those that die within a second. What is
  // still in the vault or waits is left to this process's exit.
  ~FdSink();
  FdSink(const FdSink&) = delete;
  FdSink& operator=(const FdSink&) = delete;

  // Lets go of `fds`: a sink closes them, later.
  void Drop(std::vector<Fd> fds);
  // Keeps a sink running, hands the vault what waits, and replaces a
  // stuck sink; at the start, after a sink's exit, and now and then while
  // `busy`.
  void Flush();
  // A sink's pidfd was readable: reaps it.
  void OnExit(pid_t pid);

  // Descriptors the vault has not taken yet.
  size_t held() const { return held_.size(); }
  bool saturated() const { return held_.size() >= kMaxHeld; }
  // Descriptors wait, or batches are unread: call Flush again soon.
  bool busy() const { return !held_.empty() || behind_since_.has_value(); }
  // Batches put in the vault, ever (tests).
  uint64_t sent() const { return sent_; }
  // The sink that takes batches now; 0 when none (tests).
  pid_t active_pid() const { return active_ ? active_->pid : 0; }

 private:
  FdSink(int epoll_fd, uint64_t tag) : epoll_fd_(epoll_fd), tag_(tag) {}
  struct Sink {
    pid_t pid = 0;
    Fd pidfd;
  };
  // A new active sink; false at the bound, or when the kernel refuses.
  bool Start();
  // The active sink reads nothing more: killed, kept until it is reaped.
  void Retire();
  // Replaces a stuck sink, or gives back lost tokens, once batches have
  // been unread for a second.
  void Check(std::chrono::steady_clock::time_point now);

  const int epoll_fd_;
  const uint64_t tag_;
  uid_t uid_ = 65534;
  gid_t gid_ = 65534;
  Fd vault_in_, vault_out_;    // ltd writes batches in; sinks read them out
  Fd tokens_in_, tokens_out_;  // a pipe: a byte a batch ltd holds no copy of
  Sink* active_ = nullptr;
  std::map<pid_t, Sink> sinks_;  // live ones, the active one among them
  std::deque<Fd> held_;
  uint64_t sent_ = 0;  // batches put in the vault, ever
  // Since when batches have been in the vault and none was read, and how
  // many had been read then.
  std::optional<std::chrono::steady_clock::time_point> behind_since_;
  uint64_t read_at_look_ = 0;
  bool told_start_failed_ = false;
};

}  // namespace ltd
