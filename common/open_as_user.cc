#include "open_as_user.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <system_error>
#include <thread>

#include "posix_error.h"
#include "str_util.h"

namespace ltd {
namespace {

// Runs `fn` on a new thread that has become `user` for file access;
// `fn`'s status, or why the thread could not become the user.
absl::Status AsUser(const FileUser& user, const std::function<absl::Status()>& fn) {
  // Not root (ltrun): this process is the user already.
  if (geteuid() != 0) return geteuid() == user.uid ? fn() : absl::PermissionDeniedError(
      Cat("cannot open files as uid ", user.uid, " without root"));
  absl::Status result = absl::InternalError("not run");
  try {
    std::thread t([&] {
      // Groups first (needs CAP_SETGID, which the fsgid change keeps).
      if (syscall(SYS_setgroups, user.groups.size(), user.groups.data()) != 0) {
        result = PosixError("setgroups", std::to_string(user.uid), errno);
        return;
      }
      syscall(SYS_setfsgid, user.gid);
      syscall(SYS_setfsuid, user.uid);
      // setfsuid says nothing of failure: check it took.
      if (static_cast<uid_t>(syscall(SYS_setfsuid, -1)) != user.uid ||
          static_cast<gid_t>(syscall(SYS_setfsgid, -1)) != user.gid) {
        result = absl::InternalError(Cat("cannot take the file ids of uid ", user.uid));
        return;
      }
      result = fn();
    });
    t.join();
  } catch (const std::system_error& e) {
    return absl::UnavailableError(Cat("no thread to open files as uid ", user.uid, ": ", e.what()));
  }
  return result;
}

absl::Status NotAFile(const std::string& path, const struct stat& st) {
  const char* what = S_ISLNK(st.st_mode)    ? "a symbolic link"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISDIR(st.st_mode)  ? "a directory"
                                            : "no regular file";
  return absl::PermissionDeniedError(Cat(path, " is ", what, "; give a regular file"));
}

}  // namespace

absl::StatusOr<Fd> OpenOutputAsUser(const std::string& path, const FileUser& user, bool truncate) {
  Fd out;
  absl::Status s = AsUser(user, [&]() -> absl::Status {
    // O_NONBLOCK: a FIFO with no reader must not hang the open (it is
    // refused below); O_NOFOLLOW: no link at the last component.
    const int flags = O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK |
                      O_CLOEXEC;
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
    out = std::move(fd);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

FileUser FileUserOf(uid_t uid, gid_t gid) {
  FileUser u{uid, gid, {gid}};
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return u;
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (getgrouplist(found->pw_name, gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(std::min(n, 65536)));
    if (getgrouplist(found->pw_name, gid, groups.data(), &n) < 0) return u;
  }
  groups.resize(static_cast<size_t>(n));
  u.groups = std::move(groups);
  return u;
}

absl::Status CheckOutputAsUser(const std::string& path, const FileUser& user, bool dir_only) {
  return AsUser(user, [&]() -> absl::Status {
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
    const std::string dir = slash == std::string::npos ? "." : path.substr(0, std::max<size_t>(slash, 1));
    if (syscall(SYS_faccessat2, AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) != 0) {
      return absl::PermissionDeniedError(
          Cat("cannot create a file in ", dir, ": ", std::strerror(errno)));
    }
    return absl::OkStatus();
  });
}

}  // namespace ltd
