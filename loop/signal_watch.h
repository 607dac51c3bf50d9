// Signals taken on the loop as reads of a signalfd rather than through a
// handler. A uv_signal_t costs five system calls to start and five to
// stop (its process-wide lock, the mask, the handler), each signal; a
// watch is one fd polled on the loop, however many signals it takes.
//
// Its signals must be blocked on every thread of the process for as long
// as it watches (a thread that has one unblocked gets it at its default
// action, which ends the process): block them before any thread starts,
// and keep them blocked until the watch is gone (BlockedSignals).
#pragma once

#include <signal.h>
#include <uv.h>

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "fd.h"
#include "uv_handle.h"

namespace ltd {

// Blocks `signals` on the calling thread while it lives; a signal that
// came meanwhile and no watch took is delivered as it unblocks them.
class BlockedSignals {
 public:
  explicit BlockedSignals(const sigset_t& signals);
  ~BlockedSignals();
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;

 private:
  sigset_t signals_;
};

class SignalWatch {
 public:
  // Calls `on_signal` on the loop with each of `signals` that comes.
  static absl::StatusOr<std::unique_ptr<SignalWatch>> Start(uv_loop_t* loop,
                                                            const sigset_t& signals,
                                                            std::function<void(int)> on_signal);
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

 private:
  SignalWatch() = default;
  void Read();

  Fd fd_;  // the signalfd; closed after the poll that watches it
  UvPtr<uv_poll_t> poll_;
  std::function<void(int)> on_signal_;
};

}  // namespace ltd
