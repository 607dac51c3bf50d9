#include "spare.h"

#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "spdlog/spdlog.h"

namespace ltd {
namespace {

// The numbers /proc/self/`dir` lists (its fds, its threads), sorted, but
// the listing's own fd.
std::optional<std::vector<int>> Listed(const char* dir) {
  DIR* d = opendir(dir);
  if (d == nullptr) return std::nullopt;
  std::vector<int> out;
  const int own = dirfd(d);
  const bool fds = std::strcmp(dir, "/proc/self/fd") == 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const int n = std::atoi(e->d_name);
    if (!fds || n != own) out.push_back(n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

// Each open fd, and what it is open on.
std::optional<std::vector<Spare::OpenFile>> Spare::OpenFiles() {
  const auto fds = Listed("/proc/self/fd");
  if (!fds) return std::nullopt;
  std::vector<OpenFile> out;
  for (int fd : *fds) {
    struct stat st {};
    if (fstat(fd, &st) != 0) return std::nullopt;
    out.push_back({fd, st.st_dev, st.st_ino});
  }
  return out;
}

Spare::Spare(int argc, char** argv, int ltd_fd) : ltd_fd_(ltd_fd) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--job") == 0) {
      job_arg_ = argv[i + 1];
      room_ = std::strlen(job_arg_);
    }
  }
  close(ltd_fd_);  // whatever ltd's parent left there: each job's comes
  // libuv opens a pipe for the whole process with its first loop, and
  // keeps it: made now, it is part of the baseline.
  uv_loop_t loop;
  if (uv_loop_init(&loop) == 0) uv_loop_close(&loop);
  fds_ = OpenFiles().value_or(std::vector<OpenFile>{});
}

std::optional<std::string> Spare::AwaitJob() {
  // Its heap is given back only once no job came for a while: given back
  // after every job, it was faulted in again by the next (brk, madvise and
  // page faults were a tenth of a supervisor's CPU a job).
  if (served_ > 0) {
    pollfd assign{kAssignFd, POLLIN, 0};
    int ready;
    while ((ready = poll(&assign, 1, kTrimAfterMs)) < 0 && errno == EINTR) {
    }
    if (ready == 0) malloc_trim(0);
  }
  std::optional<AssignedJob> job = ReceiveJob(kAssignFd);
  if (!job) return std::nullopt;
  if (job->connection.get() == ltd_fd_) {
    job->connection.release();  // the lowest fd free: where it belongs
  } else if (dup3(job->connection.get(), ltd_fd_, O_CLOEXEC) < 0) {
    return std::nullopt;
  }
  ShowJob(job->id);
  return std::move(job->id);
}

void Spare::ShowJob(const std::string& text) {
  if (job_arg_ == nullptr || text.size() > room_) return;
  std::memset(job_arg_, 0, room_);
  std::memcpy(job_arg_, text.data(), text.size());
}

bool Spare::Clean() const {
  const auto threads = Listed("/proc/self/task");
  if (!threads || threads->size() != 1) {
    spdlog::info("not free for another job: {} threads", threads ? threads->size() : 0);
    return false;
  }
  siginfo_t info{};
  if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0 || errno != ECHILD) {
    spdlog::info("not free for another job: a child is left");
    return false;
  }
  const auto fds = OpenFiles();
  if (!fds || *fds != fds_) {
    spdlog::info("not free for another job: {} fds open, {} before its first",
                 fds ? fds->size() : 0, fds_.size());
    return false;
  }
  return true;
}

bool Spare::OfferAnother() {
  if (++served_ >= kMaxJobsServed || fds_.empty() || !Clean()) return false;
  ShowJob(std::string(room_, '_'));
  return SendFree(kAssignFd);
}

}  // namespace ltd
