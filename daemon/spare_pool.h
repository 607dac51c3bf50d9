// The spare supervisor: one lt-shim started ahead of need, at idle
// priority, waiting on a pipe for the job it will supervise. A
// supervisor's start is mostly the kernel and the loader mapping and
// relocating a large program (some 15 ms of CPU on a VM); the spare has
// done it on time nothing else wanted, so a job's start takes only what
// is the job's own. Loop thread.
#pragma once

#include <uv.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "loop.h"
#include "shim_spawner.h"
#include "uv_handle.h"

namespace ltd {

class SparePool {
 public:
  // `spawn` starts a spare: lt-shim with no job, reading its id from the
  // other end of the pipe it is given.
  using Spawn = std::function<absl::StatusOr<SpawnedShim>(Fd* assign)>;
  SparePool(Loop& loop, Spawn spawn) : loop_(loop), spawn_(std::move(spawn)) {}
  // Kills the spare; it is gone by itself once ltd is (EOF on its pipe).
  ~SparePool() { Kill(); }
  SparePool(const SparePool&) = delete;
  SparePool& operator=(const SparePool&) = delete;

  // A new spare `delay` from now (0: the loop's next turn), unless there
  // is one or one is due.
  void Prepare(std::chrono::milliseconds delay);
  // The spare, given `job_id` and normal priority; nullopt when there is
  // none or it cannot take the job.
  std::optional<SpawnedShim> Take(const std::string& job_id);

 private:
  struct Spare {
    SpawnedShim process;
    Fd assign;                   // the pipe its job id comes down
    UvPtr<uv_poll_t> exit_poll;  // should it die while it waits
  };
  void Start();
  void OnExit();
  void Kill();

  Loop& loop_;
  Spawn spawn_;
  std::unique_ptr<Spare> spare_;
  UvPtr<uv_timer_t> timer_;
  bool on_ = true;  // off once a spare could not be given normal priority
};

}  // namespace ltd
