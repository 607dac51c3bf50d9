#include "open_as_user.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "posix_error.h"
#include "str_util.h"

namespace ltd {
namespace {

// `uid`'s login groups, as the job's ranks get them; just `gid` if the
// user database has no such user.
std::vector<gid_t> LoginGroupsOf(uid_t uid, gid_t gid) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return {gid};
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (getgrouplist(found->pw_name, gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(std::min(n, 65536)));
    if (getgrouplist(found->pw_name, gid, groups.data(), &n) < 0) return {gid};
  }
  groups.resize(static_cast<size_t>(n));
  return groups;
}

// Becomes `uid` for file access, on this thread only.
absl::Status BecomeFileUser(uid_t uid, gid_t gid) {
  const std::vector<gid_t> groups = LoginGroupsOf(uid, gid);
  // Groups first (needs CAP_SETGID, which the fsgid change keeps).
  if (syscall(SYS_setgroups, groups.size(), groups.data()) != 0) {
    return PosixError("setgroups", std::to_string(uid), errno);
  }
  syscall(SYS_setfsgid, gid);
  syscall(SYS_setfsuid, uid);
  // setfsuid says nothing of failure: check it took.
  if (static_cast<uid_t>(syscall(SYS_setfsuid, -1)) != uid ||
      static_cast<gid_t>(syscall(SYS_setfsgid, -1)) != gid) {
    return absl::InternalError(Cat("cannot take the file ids of uid ", uid));
  }
  return absl::OkStatus();
}

// Threads per user that have not returned yet, process-wide.
std::mutex running_mu;
std::map<uid_t, int> running;

struct Call {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  absl::Status result = absl::InternalError("not run");
};

absl::Status NotAFile(const std::string& path, const struct stat& st) {
  const char* what = S_ISLNK(st.st_mode)    ? "a symbolic link"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISDIR(st.st_mode)  ? "a directory"
                                            : "no regular file";
  return absl::PermissionDeniedError(Cat(path, " is ", what, "; give a regular file"));
}

}  // namespace

absl::Status RunAsFileUser(uid_t uid, gid_t gid, std::function<absl::Status()> fn,
                           std::chrono::milliseconds deadline) {
  if (geteuid() != 0) {
    return geteuid() == uid ? fn()
                            : absl::PermissionDeniedError(
                                  Cat("cannot open files as uid ", uid, " without root"));
  }
  {
    std::lock_guard lock(running_mu);
    if (running[uid] >= kMaxWaitingPerUser) {
      return absl::UnavailableError(
          Cat("uid ", uid, " has ", kMaxWaitingPerUser,
              " file opens still waiting on their file system; give a path on a file system "
              "that answers"));
    }
    ++running[uid];
  }
  auto call = std::make_shared<Call>();
  try {
    std::thread([call, uid, gid, fn = std::move(fn)] {
      absl::Status s = BecomeFileUser(uid, gid);
      if (s.ok()) s = fn();
      {
        std::lock_guard lock(running_mu);
        if (--running[uid] <= 0) running.erase(uid);
      }
      std::lock_guard lock(call->mu);
      call->result = std::move(s);
      call->done = true;
      call->cv.notify_all();
    }).detach();
  } catch (const std::system_error& e) {
    std::lock_guard lock(running_mu);
    if (--running[uid] <= 0) running.erase(uid);
    return absl::UnavailableError(Cat("no thread to open files as uid ", uid, ": ", e.what()));
  }
  std::unique_lock lock(call->mu);
  if (!call->cv.wait_for(lock, deadline, [&] { return call->done; })) {
    return absl::DeadlineExceededError(Cat("its file system did not answer in ", deadline.count(),
                                           " ms; give a path on a file system that answers"));
  }
  return call->result;
}

absl::StatusOr<Fd> OpenOutputFile(const std::string& path, bool truncate) {
  // O_NONBLOCK: a FIFO with no reader must not hang the open (it is
  // refused below); O_NOFOLLOW: no link at the last component.
  const int flags = O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC;
  Fd fd(open(path.c_str(), flags, 0644));
  if (!fd.valid()) {
    if (errno == ELOOP) {
      return absl::PermissionDeniedError(Cat(path, " is a symbolic link; give a regular file"));
    }
    return PosixError("open", path, errno);
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return PosixError("fstat", path, errno);
  if (!S_ISREG(st.st_mode)) return NotAFile(path, st);
  if (truncate && ftruncate(fd.get(), 0) != 0) return PosixError("ftruncate", path, errno);
  const int fl = fcntl(fd.get(), F_GETFL);
  if (fl >= 0) fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

absl::Status CheckOutputFile(const std::string& path, bool dir_only) {
  struct stat st {};
  if (!dir_only && lstat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) return NotAFile(path, st);
    // AT_EACCESS: the thread's own (file) ids, not the real ones.
    if (syscall(SYS_faccessat2, AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) != 0) {
      return PosixError("open", path, errno);
    }
    return absl::OkStatus();
  }
  if (!dir_only && errno != ENOENT) return PosixError("stat", path, errno);
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : path.substr(0, std::max<size_t>(slash, 1));
  if (syscall(SYS_faccessat2, AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) != 0) {
    return absl::PermissionDeniedError(
        Cat("cannot create a file in ", dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace ltd
