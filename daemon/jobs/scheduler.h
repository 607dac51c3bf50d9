// Placement: which pending job starts next, on which device slots. Jobs
// queue per user, first come first served within a user; between users the
// queue is fair: each user's oldest job is a candidate, the user holding the
// fewest devices goes first, then the one served least recently, and a
// candidate that does not fit holds back only its own user's later jobs,
// never another user's. (A large job can therefore wait while smaller ones
// of other users fill the slots it needs; it starts once its user comes
// first with enough slots free.) A task of an array with a throttle (%N)
// is passed over while N of its array run; the user's next job is the
// candidate then. Pure logic: no clock, no I/O.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ltd {

struct SchedulerConfig {
  int slots = 1;
  std::vector<std::string> gpu_ids;  // non-empty: the slots are these GPUs
  int user_max_running_jobs = 0;     // 0: no limit but the devices
  int user_max_pending_jobs = 1000;
};

// A job's array, for the throttle: its id ("": none), the most of its
// tasks that may run at once (0: any number), and how many tasks it has.
struct ArrayGate {
  std::string array;
  uint32_t throttle = 0;
  uint32_t tasks = 0;
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerConfig config);

  // Whether `uid` may queue `adding` more jobs (its pending limit; an
  // array's tasks count one each), counting `also_waiting` jobs of its
  // that wait elsewhere (for other jobs).
  absl::Status MayQueue(uid_t uid, const std::string& user, size_t also_waiting = 0,
                        size_t adding = 1) const;
  // `seq` orders jobs by submission (ids count up).
  void Enqueue(const std::string& id, uint64_t seq, uid_t uid, int devices, ArrayGate gate = {});
  // A pending job that will never start (cancelled). Running ones: Release.
  void Dequeue(const std::string& id);

  struct Placement {
    std::string id;
    std::vector<int> slots;
    std::string cuda_visible_devices;  // the GPUs' ids, when slots are GPUs
  };
  // Takes slots for every job that can start now, in the order to start.
  std::vector<Placement> Place();
  // Whether a job of `uid` needing `devices`, queued now, would be the
  // next Place()'s: no job waits, its user is under its running limit and
  // the slots are free.
  bool PlacesAtOnce(uid_t uid, int devices) const;
  // A job placed by an earlier ltd, still running on `slots`.
  void Hold(const std::string& id, uid_t uid, const std::vector<int>& slots,
            const std::string& array = "");
  // A placed job ended: its slots are free and it no longer counts for its
  // user.
  void Release(const std::string& id);
  // The last Place()'s placement of `id` taken back before its job was
  // recorded (the disk refused the record): as if never made, the user's
  // turn among the others included.
  void Unplace(const std::string& id);

  // A slot out of use (its GPU is quarantined): not free, never placed on.
  void SetUnavailable(int slot, bool unavailable);
  // Job `id` of `uid` ended, but processes of it that would not die still
  // hold its `devices`: until EndQuarantine they count as a running job of
  // that user, for its limit and its share, as the job did.
  void ChargeQuarantine(const std::string& id, uid_t uid, int devices);
  void EndQuarantine(const std::string& id);

  // Why a pending job has not been placed, in words ("needs 4 devices, 2
  // free"); "" for a job that is not pending here.
  std::string WhyPending(const std::string& id) const;

  size_t pending(uid_t uid) const;
  // Placed tasks of `array` (running or starting).
  int array_running(const std::string& array) const;
  size_t pending() const { return queued_.size(); }
  int free_slots() const;
  int slots() const { return static_cast<int>(busy_.size()); }

 private:
  struct Queued {
    uint64_t seq = 0;
    uid_t uid = 0;
    int devices = 0;
    ArrayGate gate;
  };
  bool Throttled(const Queued& q) const;
  struct User {
    std::deque<std::string> queue;  // FIFO of pending ids
    int running = 0;                // placed jobs
    int quarantined = 0;            // ended jobs whose processes would not die
    // What counts against --user-max-running-jobs.
    int counted() const { return running + quarantined; }
    int devices = 0;      // slots they hold
    uint64_t served = 0;  // when it last had a job placed (0: never)
  };
  // The user's first queued job not held back by its array's throttle; end() if none.
  std::deque<std::string>::const_iterator Head(const User& user) const;

  SchedulerConfig config_;
  std::vector<bool> busy_;
  std::vector<bool> unavailable_;
  std::map<std::string, Queued> queued_;          // pending, by id
  std::map<std::string, std::vector<int>> held_;  // placed, by id
  std::map<std::string, uid_t> owner_;            // placed, by id
  struct Charged {
    uid_t uid = 0;
    int devices = 0;
  };
  std::map<std::string, Charged> quarantined_;   // ChargeQuarantine, by id
  std::map<uid_t, User> users_;                  // users with pending or placed jobs
  std::map<std::string, int> array_running_;     // placed tasks, by array
  std::map<std::string, std::string> array_of_;  // placed tasks' arrays, by id
  uint64_t placements_ = 0;
  // The last placement, and its user's turn before it (Unplace).
  struct LastPlaced {
    std::string id;
    uint64_t served_before = 0;
  } last_placed_;
};

}  // namespace ltd
