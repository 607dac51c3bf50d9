// Job records on disk: <state-dir>/jobs/<id>/job.json beside the job's rank
// logs. A record is replaced atomically (write, fsync, rename), so a crash
// of ltd at any moment leaves either the old record or the new one.
//
// Other users may traverse the tree but read nothing in it: the state dir,
// jobs/ and every job dir are root's, 0711; records and logs 0600. The one
// place a rank writes is its job's errors/ dir (the user's while the job
// runs, a tmpfs of a bounded size under ltd: error_dir.h), for
// TORCHELASTIC_ERROR_FILE; what ltd reads back from there is the user's and
// is treated as such.
//
// Job ids count up for ever: the next one is on disk (next-id) before any
// job takes it, so neither a failed save nor a restart hands an id, and
// with it a log, to a second job.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dir_remover.h"
#include "error_dir.h"
#include "job.h"
#include "posix_error.h"

namespace ltd {

class JobStore {
 public:
  // Creates the directory tree if needed; fails if it cannot be written.
  static absl::StatusOr<JobStore> Open(const std::string& state_dir);
  // The tree the ltd that started this process (a supervisor) opened: made
  // and proved writable already, so nothing is made, changed or written
  // here (an inode made and removed, three mkdirs and three chmods at every
  // job's start).
  static JobStore Opened(const std::string& state_dir) { return JobStore(state_dir); }

  // Atomic; durable (fdatasync) once the job is final.
  absl::Status Save(const Job& job) const;
  // One job's record: NotFound without one, DataLoss when unreadable.
  absl::StatusOr<Job> Load(const std::string& job_id) const;
  // Every readable record, one at a time on each of `threads` threads (a
  // record may be megabytes: at most `threads` are in memory at once, and
  // `fn` runs on those threads, concurrently); unreadable ones are logged
  // and skipped.
  void ForEach(const std::function<void(Job&&)>& fn, int threads = 1) const;

  // Deletes a job's record and logs: the dir is renamed away at once, and
  // removed on a thread of the store's (it may hold a user's many files).
  absl::Status Remove(const std::string& job_id) const;
  // Blocks until what Remove handed over is gone (tests).
  void DrainRemovals() const { remover_->Drain(); }
  // What an earlier ltd had not finished removing goes now, off the caller
  // (ltd's start).
  void RemoveLeftovers() const;

  // Takes the next job id, at least `at_least`, and records that it is
  // taken before returning it. With `reserve` > 1 the record covers that
  // many ids at once, and those after this one are handed out from memory
  // without touching the disk (one synced write per `reserve` jobs): after
  // a crash the next ltd starts past them, so ids skip but never repeat.
  absl::StatusOr<uint64_t> TakeId(uint64_t at_least, uint64_t reserve = 1);
  // On a clean stop: the ids reserved and not handed out are free again.
  absl::Status ReturnReservedIds();

  std::string JobDir(const std::string& job_id) const;
  // The lock a supervisor of the job holds for its life (flock): one at a
  // time, and ltd sees whether one is there (shim/first_contact.h).
  std::string SupervisorLock(const std::string& job_id) const;
  // The job's dir (fails if it exists: ids are never reused) and its
  // errors/ dir, root's until the job starts (error_dir.h).
  absl::Status CreateJobDir(const std::string& job_id) const;
  std::string ErrorFile(const std::string& job_id, int rank) const;
  // The job starts: errors/ becomes its user's, bounded by `bound` where a
  // tmpfs can be mounted (OpenErrorDir in error_dir.h).
  absl::Status OpenErrorDir(const std::string& job_id, uid_t uid, gid_t gid,
                            const std::optional<ErrorDirBound>& bound,
                            ErrorDirMount* mounted = nullptr) const;
  // What a rank left in its TORCHELASTIC_ERROR_FILE: at most `max` bytes of
  // a regular file of its own user (no link to someone else's file, no
  // FIFO to block on). NotFound when there is none.
  absl::StatusOr<std::string> ReadErrorFile(const std::string& job_id, int rank, uid_t uid,
                                            size_t max,
                                            const ErrorDirMount* mounted = nullptr) const;
  // At the job's end: its errors/ dir, unmounted, becomes root's (0700),
  // so the user writes nothing more there once the job has ended.
  absl::StatusOr<ErrorDirUse> CloseErrorDir(const std::string& job_id,
                                            ErrorDirMount* mounted = nullptr) const;
  const std::string& state_dir() const { return state_dir_; }

 private:
  explicit JobStore(std::string state_dir) : state_dir_(std::move(state_dir)) {}
  std::string state_dir_;
  // Shared by copies of the store; its thread ends with the last of them.
  std::shared_ptr<DirRemover> remover_ = std::make_shared<DirRemover>();
  uint64_t next_id_ = 0;       // one past the last id this store handed out
  uint64_t reserved_end_ = 0;  // next-id on disk says ids below this are taken
};

// At a job's end, by whoever ends it: its errors/ closed, what its ranks
// left there noted in `job`, and logged when they filled it or it could
// not be closed. Whether `job` changed. `mounted`: what the opener held.
bool CloseJobErrorDir(const JobStore& store, Job& job, ErrorDirMount* mounted = nullptr);

}  // namespace ltd
