// Spare supervisors: lt-shim processes started ahead of need, at idle
// priority, each waiting on its socket for the job it will supervise. A
// supervisor's start is mostly the kernel mapping a program and the
// program's initialisers; a spare has done it on time nothing else
// wanted, so a job's start takes only what is the job's own. A job that
// finds none starts one, at once, the same way. And a supervisor that ltd
// gave a job this way says when it is done with it, and clean of it
// (shim/spare.h): it waits as a spare again, so that most jobs'
// supervisors are neither started nor torn down, however many start at
// once. At most kMaxSpares wait; of those that waited kIdleLimit, all but
// the last go. Loop thread.
#pragma once

#include <uv.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loop.h"
#include "shim_spawner.h"
#include "uv_handle.h"

namespace ltd {

class SparePool {
 public:
  // As many as jobs start at once on a busy node; each waits in some
  // 300 KiB of its own (its text is shared with the others').
  static constexpr size_t kMaxSpares = 16;
  static constexpr std::chrono::seconds kIdleLimit{30};

  // `spawn` starts a spare: lt-shim with no job, reading its jobs from
  // the other end of the socket it is given.
  using Spawn = std::function<absl::StatusOr<SpawnedShim>(Fd* assign)>;
  // `freed`: a supervisor lent with a job is free of it; what watched it
  // lets go of it (before this pool keeps it or kills it).
  using Freed = std::function<void(pid_t)>;
  SparePool(Loop& loop, Spawn spawn, Freed freed)
      : loop_(loop), spawn_(std::move(spawn)), freed_(std::move(freed)) {}
  // Kills the spares; each is gone by itself once ltd is (EOF on its
  // socket), and so is each lent one once its job ends.
  ~SparePool() { Kill(); }
  SparePool(const SparePool&) = delete;
  SparePool& operator=(const SparePool&) = delete;

  // A new spare `delay` from now (0: the loop's next turn), unless one
  // waits or one is due.
  void Prepare(std::chrono::milliseconds delay);
  // A spare (the one that waited least, or one started now when none
  // waits), given `job_id` with a new connection (its `channel`) and
  // normal priority; nullopt when spares are off or none can take the job.
  std::optional<SpawnedShim> Take(const std::string& job_id);

 private:
  // A supervisor of the pool's, for its whole life: waiting, lent with a
  // job, or retiring. Its two polls are made once and stay started from
  // job to job (a poll made anew costs libuv four system calls, a start
  // or a stop one or two): each callback sees which it is.
  struct Spare {
    SparePool* pool = nullptr;
    SpawnedShim process;         // its pidfd the pool's: a job's watcher gets a copy
    Fd assign;                   // the socket its jobs come down
    UvPtr<uv_poll_t> exit_poll;  // its end, reaped here unless it is lent
    UvPtr<uv_poll_t> word_poll;  // its word that it is free (from its first job)
    std::chrono::steady_clock::time_point since;
    bool lent = false;      // given a job: its watcher reaps it, should it die
    bool retiring = false;  // killed, and reaped once it is gone
  };

  absl::StatusOr<std::unique_ptr<Spare>> StartOne();
  void Start();
  void Keep(std::unique_ptr<Spare> spare);
  void OnExit(Spare* spare);
  void OnWord(Spare* spare);
  void Trim();
  // Starts `*poll` (made first, on `fd`, when there is none) for reading:
  // it calls (spare->pool->*kOn)(spare). False when it cannot be made.
  template <void (SparePool::*kOn)(Spare*)>
  bool Poll(UvPtr<uv_poll_t>& poll, int fd, Spare* spare);
  // Kills it without waiting on the loop; OnExit reaps it.
  void Retire(std::unique_ptr<Spare> spare);
  void Kill();
  static void KillOne(std::unique_ptr<Spare> spare);

  Loop& loop_;
  Spawn spawn_;
  Freed freed_;
  std::vector<std::unique_ptr<Spare>> spares_;  // the last waited least
  std::vector<std::unique_ptr<Spare>> retiring_;
  // One a job whose supervisor was a spare, while the job runs.
  std::vector<std::unique_ptr<Spare>> lent_;
  UvPtr<uv_timer_t> timer_;
  UvPtr<uv_timer_t> trim_timer_;
  bool on_ = true;  // off once a spare could not be given normal priority
};

}  // namespace ltd
