#include "job_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>

#include "fd.h"
#include "file_io.h"
#include "spdlog/spdlog.h"
#include "str_util.h"

namespace ltd {
namespace {

absl::Status MakeDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return PosixError("mkdir", path, errno);
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return PosixError("write", path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status SyncDir(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return PosixError("open", dir, errno);
  absl::Status status = absl::OkStatus();
  if (fsync(fd) != 0) status = PosixError("fsync", dir, errno);
  close(fd);
  return status;
}

}  // namespace

absl::StatusOr<JobStore> JobStore::Open(const std::string& state_dir) {
  for (const std::string& dir : {state_dir, state_dir + "/jobs", state_dir + "/removed"}) {
    if (auto s = MakeDir(dir, 0711); !s.ok()) return s;
    // An older ltd made them 0755: nobody but root may list jobs' files.
    if (chmod(dir.c_str(), 0711) != 0) return PosixError("chmod", dir, errno);
  }
  // Prove the directory is writable now rather than at the first job.
  const std::string probe = state_dir + "/.write-test";
  const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return PosixError("open", probe, errno);
  close(fd);
  unlink(probe.c_str());
  return JobStore(state_dir);
}

void JobStore::RemoveLeftovers() const {
  const std::string removed = state_dir_ + "/removed";
  DIR* d = opendir(removed.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") remover_->Remove(removed + "/" + name);
  }
  closedir(d);
}

std::string JobStore::JobDir(const std::string& job_id) const {
  return state_dir_ + "/jobs/" + job_id;
}

std::string JobStore::SupervisorLock(const std::string& job_id) const {
  return JobDir(job_id) + "/supervisor.lock";
}

namespace {
std::string ErrorFileName(int rank) { return Cat("error-", rank, ".json"); }
}  // namespace

std::string JobStore::ErrorFile(const std::string& job_id, int rank) const {
  return Cat(JobDir(job_id), "/errors/", ErrorFileName(rank));
}

absl::Status JobStore::CreateJobDir(const std::string& job_id) const {
  const std::string dir = JobDir(job_id);
  if (mkdir(dir.c_str(), 0711) != 0) return PosixError("mkdir", dir, errno);
  absl::Status s = MakeErrorDir(dir);
  if (!s.ok()) rmdir(dir.c_str());
  return s;
}

absl::Status JobStore::OpenErrorDir(const std::string& job_id, uid_t uid, gid_t gid,
                                    const std::optional<ErrorDirBound>& bound,
                                    ErrorDirMount* mounted) const {
  return ltd::OpenErrorDir(JobDir(job_id), uid, gid, bound, mounted);
}

absl::StatusOr<std::string> JobStore::ReadErrorFile(const std::string& job_id, int rank, uid_t uid,
                                                    size_t max,
                                                    const ErrorDirMount* mounted) const {
  return ltd::ReadErrorFile(JobDir(job_id), ErrorFileName(rank), uid, max, mounted);
}

absl::StatusOr<ErrorDirUse> JobStore::CloseErrorDir(const std::string& job_id,
                                                    ErrorDirMount* mounted) const {
  return ltd::CloseErrorDir(JobDir(job_id), mounted);
}

namespace {

// next-id says `next`, atomically and durably.
absl::Status WriteNextId(const std::string& path, uint64_t next) {
  return ReplaceFile(path, Cat(next, "\n"));
}

// Held while next-id is read and written: several ltrun may share a state
// dir (one user's runs), and each must take its own id.
absl::StatusOr<Fd> LockNextId(const std::string& state_dir) {
  const std::string path = state_dir + "/next-id.lock";
  Fd fd(open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return PosixError("open", path, errno);
  while (flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return PosixError("flock", path, errno);
  }
  return fd;
}

}  // namespace

absl::StatusOr<uint64_t> JobStore::TakeId(uint64_t at_least, uint64_t reserve) {
  const std::string path = state_dir_ + "/next-id";
  uint64_t next = std::max(at_least, next_id_);
  if (next < reserved_end_) {
    // Reserved by this store: no other writer hands it out.
    struct stat st {};
    while (next < reserved_end_ && stat(JobDir(std::to_string(next)).c_str(), &st) == 0) ++next;
    if (next < reserved_end_) {
      next_id_ = next + 1;
      return next;
    }
  }
  // Past what this store reserved: what is on disk counts.
  auto lock = LockNextId(state_dir_);
  if (!lock.ok()) return lock.status();
  if (FILE* f = fopen(path.c_str(), "re")) {
    unsigned long long stored = 0;
    if (fscanf(f, "%llu", &stored) == 1) next = std::max<uint64_t>(next, stored);
    fclose(f);
  }
  // Never onto a dir some earlier job left, whatever next-id said.
  struct stat st {};
  while (stat(JobDir(std::to_string(next)).c_str(), &st) == 0) ++next;
  const uint64_t end = next + std::max<uint64_t>(reserve, 1);
  if (absl::Status s = WriteNextId(path, end); !s.ok()) return s;
  reserved_end_ = end;
  next_id_ = next + 1;
  return next;
}

absl::Status JobStore::ReturnReservedIds() {
  if (reserved_end_ <= next_id_) return absl::OkStatus();
  auto lock = LockNextId(state_dir_);
  if (!lock.ok()) return lock.status();
  if (absl::Status s = WriteNextId(state_dir_ + "/next-id", next_id_); !s.ok()) return s;
  reserved_end_ = next_id_;
  return absl::OkStatus();
}

absl::Status JobStore::Remove(const std::string& job_id) const {
  // Out of jobs/ in one rename (ids are never reused, so the name is free
  // unless an earlier removal of the same id was cut short).
  const std::string dir = JobDir(job_id);
  const std::string gone = Cat(state_dir_, "/removed/", job_id);
  // A job's errors/ tmpfs goes at its end (CloseErrorDir); should one be
  // left, it goes now, and a dir whose errors/ cannot be detached stays.
  if (auto s = DetachErrorDir(dir); !s.ok()) return s;
  // A name taken by a removal cut short (the remover has it, or the next
  // start will): the next free one, never a removal on this thread.
  for (int n = 0; n < 16; ++n) {
    const std::string to = n == 0 ? gone : Cat(gone, ".", n);
    if (rename(dir.c_str(), to.c_str()) == 0) {
      remover_->Remove(to);
      return absl::OkStatus();
    }
    if (errno == ENOENT && access(dir.c_str(), F_OK) != 0) return absl::OkStatus();
    if (errno != EEXIST && errno != ENOTEMPTY) break;
  }
  return PosixError("rename", dir, errno);
}

absl::Status JobStore::Save(const Job& job) const {
  const std::string dir = JobDir(job.id);
  const std::string path = dir + "/job.json";
  const std::string tmp = path + ".tmp";
  // ToJson keeps bytes valid UTF-8; `replace` is the last line of defence.
  const std::string text =
      ToJson(job).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return PosixError("open", tmp, errno);
  absl::Status status = WriteAll(fd, text, tmp);
  // The rename alone is atomic against an ltd crash. A final record is
  // also made durable against a host crash; a live one is rewritten soon
  // anyway, and is LOST after a reboot whatever it says.
  if (status.ok() && IsFinal(job.state) && fdatasync(fd) != 0) {
    status = PosixError("fdatasync", tmp, errno);
  }
  if (close(fd) != 0 && status.ok()) status = PosixError("close", tmp, errno);
  if (status.ok() && rename(tmp.c_str(), path.c_str()) != 0)
    status = PosixError("rename", tmp, errno);
  if (!status.ok()) {
    unlink(tmp.c_str());
    return status;
  }
  // The rename lives in the directory: without syncing it, a host crash can
  // bring back the old record (or none) beside a durable file.
  if (IsFinal(job.state)) status = SyncDir(dir);
  return status;
}

absl::StatusOr<Job> JobStore::Load(const std::string& job_id) const {
  const std::string path = JobDir(job_id) + "/job.json";
  auto text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  auto parsed = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  auto job = JobFromJson(parsed);
  if (!job || job->id != job_id) return absl::DataLossError(Cat("unreadable record ", path));
  return std::move(*job);
}

namespace {

// Calls fn with each entry of state_dir's jobs/ (its name).
void ForEachJobDir(const std::string& state_dir, const std::function<void(const char*)>& fn) {
  const std::string root = state_dir + "/jobs";
  DIR* dir = opendir(root.c_str());
  if (dir == nullptr) {
    spdlog::warn("cannot list {}: {}", root, std::strerror(errno));
    return;
  }
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') fn(entry->d_name);
  }
  closedir(dir);
}

}  // namespace

void JobStore::ForEach(const std::function<void(Job&&)>& fn, int threads) const {
  std::vector<std::string> names;
  ForEachJobDir(state_dir_, [&](const char* name) { names.emplace_back(name); });
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < names.size(); i = next++) {
      auto job = Load(names[i]);
      if (!job.ok()) {
        if (!absl::IsNotFound(job.status())) {
          spdlog::warn("skipping job record: {}", std::string(job.status().message()));
        }
        continue;
      }
      fn(std::move(*job));
    }
  };
  // Fewer helpers than asked, or none, when threads cannot be had: this
  // thread reads whatever they do not.
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;
    }
  }
  work();
  for (std::thread& t : helpers) t.join();
}

bool CloseJobErrorDir(const JobStore& store, Job& job, ErrorDirMount* mounted) {
  auto use = store.CloseErrorDir(job.id, mounted);
  if (!use.ok()) {
    spdlog::warn("job={} errors/ dir not closed: {}", job.id, std::string(use.status().message()));
    return false;
  }
  if (!use->not_kept.empty()) {
    spdlog::warn("job={} errors/: some files were not kept: {}", job.id, use->not_kept);
  }
  if (use->full) {
    spdlog::warn(
        "job={} errors/ was full ({} bytes, {} files of {} and {}): the ranks' writes "
        "past it failed",
        job.id, use->bytes, use->files, job.errors.max_bytes, job.errors.max_files);
  }
  return NoteErrorDirUse(*use, job.errors);
}

}  // namespace ltd
