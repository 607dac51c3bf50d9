// Job records on disk: <state-dir>/jobs/<id>/job.json beside the job's rank
// logs. A record is replaced atomically (write, fsync, rename), so a crash
// of ltd at any moment leaves either the old record or the new one.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "job.h"

namespace ltd {

class JobStore {
 public:
  // Creates the directory tree if needed; fails if it cannot be written.
  static absl::StatusOr<JobStore> Open(const std::string& state_dir);

  // Atomic; durable (fdatasync) once the job is final.
  absl::Status Save(const Job& job) const;
  // Every readable record; unreadable ones are logged and skipped.
  std::vector<Job> LoadAll() const;

  // Deletes a job's record and logs.
  absl::Status Remove(const std::string& job_id) const;

  std::string JobDir(const std::string& job_id) const;
  absl::Status CreateJobDir(const std::string& job_id) const;
  const std::string& state_dir() const { return state_dir_; }

 private:
  explicit JobStore(std::string state_dir) : state_dir_(std::move(state_dir)) {}
  std::string state_dir_;
};

// "open(/x/y): Permission denied".
absl::Status ErrnoStatus(std::string_view call, std::string_view object, int err);

}  // namespace ltd
